"""One DynamoDB request at a time in the embedded moto server: each request atomic, as on AWS.

A correctness patch (``tornasole.local.moto_patches``). moto 5's
``TransactWriteItems`` snapshots each table it touches (a deep copy) and, when
a condition fails, puts the snapshot back: every write another thread made to
that table meanwhile is lost, and the table's stream shard is replaced.
DynamoDB itself never does that, and the evaluator relies on conditional
transactions failing harmlessly (exactly-once). The local mode runs moto in its
own process, so it serializes DynamoDB and DynamoDB Streams requests there
with one lock, around each response class's ``call_action``.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

__all__ = ["LOCK", "serialize_dynamodb", "unserialize_dynamodb"]

#: Held for each DynamoDB or DynamoDB Streams request, and by the in-process stream reader.
LOCK = threading.RLock()
_ORIGINALS: dict[type, Any] = {}  # response class -> its own call_action (None: inherited)


def _handlers() -> list[type]:
    from moto.dynamodb.responses import DynamoHandler
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

    return [DynamoHandler, DynamoDBStreamsHandler]


def serialize_dynamodb() -> None:
    """Wrap the DynamoDB response classes' ``call_action`` in the lock (idempotent)."""
    for handler in _handlers():
        if handler in _ORIGINALS:
            continue
        original = handler.call_action
        _ORIGINALS[handler] = handler.__dict__.get("call_action")

        @functools.wraps(original)
        def call_action(self: Any, _original: Any = original) -> Any:
            with LOCK:
                return _original(self)

        handler.call_action = call_action  # type: ignore[method-assign]


def unserialize_dynamodb() -> None:
    """Put moto's own request handling back (after the local mode stopped)."""
    for handler, original in list(_ORIGINALS.items()):
        if original is None:
            delattr(handler, "call_action")
        else:
            handler.call_action = original  # type: ignore[method-assign]
        del _ORIGINALS[handler]

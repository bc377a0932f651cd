"""Make the embedded moto server's DynamoDB safe and steady for the local mode's concurrent workers.

moto 5's ``TransactWriteItems`` snapshots each table it touches (a deep copy)
and, when a condition fails, puts the snapshot back: every write another
thread made to that table meanwhile is lost, and the table's stream shard is
replaced. DynamoDB itself never does that, and the evaluator relies on
conditional transactions failing harmlessly (exactly-once). The local mode runs
moto in its own process, so it serializes DynamoDB and DynamoDB Streams
requests there with one lock: each request is atomic, as it is on AWS.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

__all__ = ["release_stream", "serialize_dynamodb", "unserialize_dynamodb"]

_LOCK = threading.RLock()
_ORIGINALS: dict[type, Any] = {}


def _handlers() -> list[type]:
    from moto.dynamodb.responses import DynamoHandler
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

    return [DynamoHandler, DynamoDBStreamsHandler]


def serialize_dynamodb() -> None:
    """Wrap the handlers' ``call_action`` in the lock (idempotent)."""
    for handler in _handlers():
        if handler in _ORIGINALS:
            continue
        original = handler.call_action
        _ORIGINALS[handler] = handler.__dict__.get("call_action")

        @functools.wraps(original)
        def call_action(self: Any, _original: Any = original) -> Any:
            with _LOCK:
                return _original(self)

        handler.call_action = call_action  # type: ignore[method-assign]


def unserialize_dynamodb() -> None:
    """Put moto's own ``call_action`` back (after the local mode stopped)."""
    for handler, original in list(_ORIGINALS.items()):
        if original is None:
            del handler.call_action
        else:
            handler.call_action = original  # type: ignore[method-assign]
        del _ORIGINALS[handler]


def release_stream(table_name: str, consumed_through: int | None) -> None:
    """Forget stream records up to ``consumed_through`` and the iterators handed out so far.

    moto keeps every stream record of a table for ever and deep-copies them
    with the table in each ``TransactWriteItems`` (its rollback snapshot), so
    every transaction gets slower as the run goes on; each ``GetShardIterator``
    and ``GetRecords`` also leaves an iterator object behind. The local mode is
    the stream's only reader and takes a fresh iterator on every poll, so once
    it has handed records to ``publish_events`` (AWS would age them out after 24 h)
    both can go. Sequence numbers of later records do not change.
    """
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodbstreams.models import dynamodbstreams_backends

    with _LOCK:
        for regions in dynamodbstreams_backends.values():
            for backend in regions.values():
                backend.shard_iterators.clear()
        if consumed_through is None:
            return
        for regions in dynamodb_backends.values():
            for backend in regions.values():
                table = backend.tables.get(table_name)
                shard = getattr(table, "stream_shard", None)
                if shard is None:
                    continue
                drop = min(len(shard.items), consumed_through - shard.starting_sequence_number + 1)
                if drop > 0:
                    shard.items = shard.items[drop:]
                    shard.starting_sequence_number += drop

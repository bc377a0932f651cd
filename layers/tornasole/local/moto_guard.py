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

from tornasole.local.moto_query import query_partition
from tornasole.local.moto_transactions import patch_transactions, unpatch_transactions

__all__ = ["release_stream", "read_stream", "serialize_dynamodb", "unserialize_dynamodb"]

_LOCK = threading.RLock()
_ORIGINALS: dict[type, Any] = {}
_QUERY = object()  # the key of Table.query in _ORIGINALS


def _handlers() -> list[type]:
    from moto.dynamodb.responses import DynamoHandler
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

    return [DynamoHandler, DynamoDBStreamsHandler]


def _patch_transactions() -> None:
    from moto.dynamodb.models.table import Table

    patch_transactions()
    if _QUERY not in _ORIGINALS:
        _ORIGINALS[_QUERY] = Table.__dict__.get("query")
        Table.query = query_partition(Table.query)  # type: ignore[method-assign]


def serialize_dynamodb() -> None:
    """Wrap the handlers' ``call_action`` in the lock, snapshot transactions by partition (idempotent)."""
    _patch_transactions()
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
    """Put moto's own request handling, query and transactions back (after the local mode stopped)."""
    from moto.dynamodb.models.table import Table

    unpatch_transactions()
    for key, original in list(_ORIGINALS.items()):
        owner = Table if key is _QUERY else key
        name = "query" if key is _QUERY else "call_action"
        if original is None:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
        del _ORIGINALS[key]


def release_stream(table_name: str, consumed_through: int | None) -> None:
    """Forget stream records up to ``consumed_through`` and the iterators handed out so far.

    moto keeps every stream record of a table for ever; each ``GetShardIterator``
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


def read_stream(table_name: str, after: str | None, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` records of the table's stream after sequence number ``after`` (None: the oldest kept).

    What ``GetShardIterator`` + ``GetRecords`` return, read in-process: the local
    mode's stream reader lives in the server's own process, and those two
    requests cost more than the rest of the pipeline's per step (moto serializes
    every record with its new image, botocore parses it back, only for the
    reader to keep the few outbox inserts). Records are in the stream record's
    shape, sequence numbers as text, without ``ApproximateCreationDateTime``.
    Only the top two levels are copies: the images are moto's own, which it
    never changes; a consumer that keeps or changes a record copies it
    (``StreamSource`` does, for what it delivers).
    """
    from moto.dynamodb.models import dynamodb_backends

    with _LOCK:
        for regions in dynamodb_backends.values():
            for backend in regions.values():
                shard = getattr(backend.tables.get(table_name), "stream_shard", None)
                if shard is None:
                    continue
                start = 0 if after is None else int(after) + 1 - shard.starting_sequence_number
                picked = shard.items[max(0, start) : max(0, start) + limit]
                return [_record_copy(r.to_json()) for r in picked]
    return []


def _record_copy(record: dict[str, Any]) -> dict[str, Any]:
    dynamodb = {k: v for k, v in record["dynamodb"].items() if k != "ApproximateCreationDateTime"}
    return {**record, "dynamodb": dynamodb}

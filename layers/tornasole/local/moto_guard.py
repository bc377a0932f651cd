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

__all__ = ["release_stream", "read_stream", "serialize_dynamodb", "unserialize_dynamodb"]

_LOCK = threading.RLock()
_ORIGINALS: dict[type, Any] = {}
_QUERY = object()  # the key of Table.query in _ORIGINALS (Table itself holds __deepcopy__)
_TRANSACTION = threading.local()  # the keys the running TransactWriteItems names, per table; its snapshots


def _handlers() -> list[type]:
    from moto.dynamodb.responses import DynamoHandler
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

    return [DynamoHandler, DynamoDBStreamsHandler]


def _touched_keys(backend: Any, transact_items: list[dict[str, Any]]) -> dict[str, set[Any]] | None:
    """Per table, the ``(hash, range)`` keys of the items a transaction names (None: a shape not handled)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    touched: dict[str, set[Any]] = {}
    for entry in transact_items:
        _, op = next(iter(entry.items()))
        table = backend.tables.get(op.get("TableName"))
        key = op.get("Key") or op.get("Item") or {}
        if (
            table is None
            or not table.has_range_key
            or table.hash_key_attr not in key
            or table.range_key_attr not in key
        ):
            return None  # not the shape the partial snapshot handles: moto's full copy
        pair = (DynamoType(key[table.hash_key_attr]), DynamoType(key[table.range_key_attr]))
        touched.setdefault(table.name, set()).add(pair)
    return touched


def _table_snapshot(table: Any, memo: dict[int, Any]) -> Any:
    """``Table.__deepcopy__`` while the local mode runs: inside a transaction, copy only the items it names.

    moto snapshots the *whole* table (every item, every stream record) once per
    transaction item so it can roll back, which made each evaluated step slower
    the more jobs and steps the table held. Requests are serialized (``_LOCK``),
    so only the items the transaction writes can change before a rollback: those
    are deep-copied (in copies of their partitions' dicts), everything else is
    shared; the copies moto asks for again within the same transaction are the
    same snapshot (nothing changed in between). Anywhere else, the ordinary deep copy.
    """
    import copy
    from collections import defaultdict

    touched = getattr(_TRANSACTION, "keys", None)
    if not touched or table.name not in touched:
        return copy._reconstruct(table, memo, *table.__reduce_ex__(4))  # what deepcopy does by default
    taken = _TRANSACTION.snapshots
    if id(table) in taken:
        return taken[id(table)]
    snapshot = copy.copy(table)
    snapshot.items = defaultdict(dict, table.items)
    copied: set[Any] = set()
    for hash_value, range_value in touched[table.name]:
        partition = table.items.get(hash_value)
        if partition is None:
            continue  # a new partition: the rollback's table does not have it
        if hash_value not in copied:  # its own dict: an item put now must not appear in the snapshot
            snapshot.items[hash_value] = dict(partition)
            copied.add(hash_value)
        if range_value in partition:  # an existing item: changed in place by an update
            snapshot.items[hash_value][range_value] = copy.deepcopy(partition[range_value])
    taken[id(table)] = snapshot
    return snapshot


def _patch_transactions() -> None:
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    if DynamoDBBackend in _ORIGINALS:
        return
    original = DynamoDBBackend.transact_write_items
    _ORIGINALS[DynamoDBBackend] = DynamoDBBackend.__dict__.get("transact_write_items")
    _ORIGINALS[Table] = Table.__dict__.get("__deepcopy__")
    _ORIGINALS[_QUERY] = Table.__dict__.get("query")
    Table.query = query_partition(Table.query)  # type: ignore[method-assign]

    @functools.wraps(original)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> Any:
        _TRANSACTION.keys = _touched_keys(self, transact_items)
        _TRANSACTION.snapshots = {}
        try:
            return original(self, transact_items)
        finally:
            _TRANSACTION.keys = None
            _TRANSACTION.snapshots = {}

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    Table.__deepcopy__ = _table_snapshot  # type: ignore[attr-defined]


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
    """Put moto's own ``call_action`` back (after the local mode stopped)."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    names = {DynamoDBBackend: "transact_write_items", Table: "__deepcopy__", _QUERY: "query"}
    for key, original in list(_ORIGINALS.items()):
        owner = Table if key is _QUERY else key
        name = names.get(key, "call_action")
        if original is None:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
        del _ORIGINALS[key]


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

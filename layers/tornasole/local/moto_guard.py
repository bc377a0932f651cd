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


class _Partition:
    """What ``Table.query`` reads of a table, narrowed to one partition (see ``_query_partition``)."""

    def __init__(self, table: Any, hash_key: Any, key_range: tuple[str, list[Any]] | None = None) -> None:
        self._table = table
        part = table.items.get(hash_key)
        if part is not None and key_range is not None:
            part = _in_key_range(part, *key_range)
        self.items = {} if part is None else {hash_key: part}

    def all_items(self) -> list[Any]:
        return type(self._table).all_items(self)  # moto's, over this partition's items

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


def _in_key_range(part: dict[Any, Any], comparison: str, bounds: list[Any]) -> dict[Any, Any]:
    """The items whose sort key meets the key condition, and the nearest item on either side of them.

    A sort key condition selects a contiguous run of the partition in sort-key order. moto's query
    walks the whole partition in that order (sizing every item) and keeps the run; it stops at the
    first item after the ``Limit``-th kept one, whichever that is. Handing it the run and its two
    neighbours gives it the same items in the same order up to any point where it can stop: the same
    page, the same ``LastEvaluatedKey``.
    """
    inside: dict[Any, Any] = {}
    below = above = None  # (sort key, item) of the nearest item before / after the run
    for key, item in part.items():
        sort_key = item.range_key
        if sort_key.compare(comparison, bounds):
            inside[key] = item
        elif _before_all(sort_key, comparison, bounds):
            if below is None or below[1].range_key < sort_key:
                below = (key, item)
        elif above is None or sort_key < above[1].range_key:
            above = (key, item)
    for neighbour in (below, above):
        if neighbour is not None:
            inside[neighbour[0]] = neighbour[1]
    return inside


def _before_all(sort_key: Any, comparison: str, bounds: list[Any]) -> bool:
    """Whether a sort key outside the condition's run sorts before it (else it sorts after it)."""
    if comparison in _RUN_FROM_FIRST:
        return False  # the run starts at the smallest key: everything outside it is after
    if comparison in _RUN_TO_LAST:
        return True
    return sort_key < bounds[0]  # =, begins_with, between: before the run iff below its low bound


# moto's names of the key conditions DynamoDB allows on a sort key, by where their run lies.
_RUN_FROM_FIRST = {"LT", "<", "LE", "<="}
_RUN_TO_LAST = {"GT", ">", "GE", ">="}
_RUN_FROM_LOW_BOUND = {"EQ", "=", "BEGINS_WITH", "BETWEEN"}


def _query_partition(original: Any) -> Any:
    """``Table.query`` on the base table reads only the partition asked for, and in it the key range.

    moto answers a base-table query by sorting *every* item of the table and then
    keeping those of the partition, so each of the evaluator's per-step queries
    got slower as the table grew (every job's steps and outbox rows). DynamoDB
    reads one partition; so does this: the same function runs over a view whose
    ``items`` hold that partition only (moto's own filtering, ordering, paging and
    copying are unchanged). Within it, moto sorted and sized every item of the job
    (each step, each evaluation record) to answer a query for the job's few ``#``
    items; with a sort key condition the view holds the items that meet it and
    their nearest neighbours (``_in_key_range``). Index queries are left as they are.
    """

    @functools.wraps(original)
    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        if index_name or hash_key is None or not self.range_key_attr:
            return original(self, hash_key, *args, **kwargs)
        view = _Partition(self, hash_key, _key_range(self, args, kwargs))
        return original(view, hash_key, *args, **kwargs)

    return query


_QUERY_KWARGS = {
    "index_name",
    "consistent_read",
    "filter_expression",
    "hash_key_conditions",
    "range_key_conditions",
}


def _key_range(table: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, list[Any]] | None:
    """The query's sort key condition when moto applies it to the table's sort key alone, else None."""
    comparison = args[0] if args else None
    bounds = args[1] if len(args) > 1 else None
    conditions = kwargs.get("range_key_conditions") or []
    if (
        len(args) > 9  # moto's own call passes these positionally; anything else keeps moto's path
        or comparison not in _RUN_FROM_FIRST | _RUN_TO_LAST | _RUN_FROM_LOW_BOUND
        or not bounds
        or set(kwargs) - _QUERY_KWARGS  # legacy KeyConditions filters
        or len(conditions) > 1
        or any(name != table.range_key_attr for name, *_ in conditions)
    ):
        return None
    return comparison, bounds


def _patch_transactions() -> None:
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    if DynamoDBBackend in _ORIGINALS:
        return
    original = DynamoDBBackend.transact_write_items
    _ORIGINALS[DynamoDBBackend] = DynamoDBBackend.__dict__.get("transact_write_items")
    _ORIGINALS[Table] = Table.__dict__.get("__deepcopy__")
    _ORIGINALS[_QUERY] = Table.__dict__.get("query")
    Table.query = _query_partition(Table.query)  # type: ignore[method-assign]

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

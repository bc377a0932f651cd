"""moto's ``TransactWriteItems`` rolled back in place: only the items a transaction names are saved.

A speed patch (``tornasole.local.moto_patches``); it relies on the DynamoDB request lock.

moto snapshots each table a transaction names with a deep copy (every item,
every stream record) so it can put the copy back when a condition fails. That
made each evaluated step slower the longer the local mode ran, and every copy
stayed alive: moto registers each model object it creates (``BaseModel``'s
instance list, read only by its dashboard), so a long run kept one table per
transaction. Requests are serialized (``dynamodb_request_lock``), so only the items the
transaction itself writes can change before a rollback. Those are saved before
it runs, and put back, with the stream cut back to its length before the
transaction, when it is cancelled: as on DynamoDB, a cancelled transaction
writes nothing, stream records included. moto's own rollback then puts the
very same table back. Transactions of another shape (a hash-only table, a key
missing) keep moto's full copy.
"""

from __future__ import annotations

import copy
import functools
import threading
from typing import Any

__all__ = ["patch_transactions", "unpatch_transactions"]

_ORIGINALS: dict[str, Any] = {}
_RUNNING = threading.local()  # names of the tables the running transaction rolls back in place
_ABSENT = object()


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
            return None  # not the shape handled in place: moto's full copy
        pair = (DynamoType(key[table.hash_key_attr]), DynamoType(key[table.range_key_attr]))
        touched.setdefault(table.name, set()).add(pair)
    return touched


class _Saved:
    """One table's state before a transaction: the items it names (or their absence) and its stream length."""

    def __init__(self, table: Any, keys: set[Any]) -> None:
        self.table = table
        self.partitions = {h for h, _ in keys if h in table.items}
        self.items = [(h, r, self._copy(table.items, h, r)) for h, r in keys]
        shard = getattr(table, "stream_shard", None)
        self.stream = shard.items if shard is not None else None
        self.stream_length = len(self.stream) if self.stream is not None else 0

    def _copy(self, items: Any, h: Any, r: Any) -> Any:
        return copy.deepcopy(items[h][r]) if h in self.partitions and r in items[h] else _ABSENT

    def restore(self) -> None:
        items = self.table.items
        for h, r, old in self.items:
            if old is not _ABSENT:
                items[h][r] = old
                continue
            partition = items.get(h)
            if partition is not None:
                partition.pop(r, None)
                if not partition and h not in self.partitions:
                    del items[h]
        if self.stream is not None:
            del self.stream[self.stream_length :]


def _same_table(table: Any, memo: dict[int, Any]) -> Any:
    """``Table.__deepcopy__``: the table itself for a transaction rolled back in place, else moto's copy."""
    if table.name in getattr(_RUNNING, "tables", ()):
        return table
    return copy._reconstruct(table, memo, *table.__reduce_ex__(4))  # what deepcopy does by default


def patch_transactions() -> None:
    """Roll ``TransactWriteItems`` back in place (idempotent)."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    if _ORIGINALS:
        return
    original = DynamoDBBackend.transact_write_items
    _ORIGINALS["transact_write_items"] = DynamoDBBackend.__dict__.get("transact_write_items")
    _ORIGINALS["__deepcopy__"] = Table.__dict__.get("__deepcopy__")

    @functools.wraps(original)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> Any:
        touched = _touched_keys(self, transact_items) if len(transact_items) <= 100 else None
        if touched is None:
            return original(self, transact_items)
        saved = [_Saved(self.tables[name], keys) for name, keys in touched.items()]
        _RUNNING.tables = set(touched)
        try:
            return original(self, transact_items)
        except BaseException:
            for table_state in saved:
                table_state.restore()
            raise
        finally:
            _RUNNING.tables = ()

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    Table.__deepcopy__ = _same_table  # type: ignore[attr-defined]


def unpatch_transactions() -> None:
    """Put moto's own ``transact_write_items`` and ``Table.__deepcopy__`` back."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    for name, owner in (("transact_write_items", DynamoDBBackend), ("__deepcopy__", Table)):
        if name not in _ORIGINALS:
            continue
        original = _ORIGINALS.pop(name)
        if original is None:
            delattr(owner, name)
        else:
            setattr(owner, name, original)

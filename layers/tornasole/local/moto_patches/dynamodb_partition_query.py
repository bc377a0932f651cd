"""moto's base-table Query, narrowed to what DynamoDB reads: the partition, and in it the key range.

A speed patch (``tornasole.local.moto_patches``): ``patch_query`` wraps ``Table.query``.
"""

from __future__ import annotations

import bisect
import functools
from typing import Any

__all__ = ["SortedPartition", "patch_query", "query_partition", "unpatch_query"]

_ORIGINALS: list[Any] = []  # Table.query as moto defines it (None: inherited), while patched


class _Partition:
    """What ``Table.query`` reads of a table, narrowed to one partition (see ``query_partition``)."""

    def __init__(self, table: Any, hash_key: Any, key_range: tuple[str, list[Any]] | None = None) -> None:
        self._table = table
        part = table.items.get(hash_key)
        if part is not None and table.range_key_type == "S" and type(part) is dict:
            part = table.items[hash_key] = SortedPartition(part)  # from now on kept in sort-key order
        if part is not None and key_range is not None:
            part = _in_key_range(part, *key_range)
        self.items = {} if part is None else {hash_key: part}

    def all_items(self) -> list[Any]:
        return type(self._table).all_items(self)  # moto's, over this partition's items

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


class SortedPartition(dict):
    """A partition of a table with a string sort key, which also keeps its sort keys in order.

    moto keeps a partition as a plain dict and walks all of it for every query
    with a sort key condition, so the evaluator's queries for a job's few ``#``
    items cost in proportion to the job's steps: a 10,000-step run spent most of
    its time there. moto changes a partition only by setting and popping keys,
    which this dict follows; the key condition's run is then found by bisection
    (``run``), as DynamoDB reads it from its sorted partition.
    """

    def __init__(self, items: dict[Any, Any] | None = None) -> None:
        super().__init__(items or {})
        self._keys = sorted(self)

    def __reduce__(self) -> Any:  # copies and pickles rebuild the order from the items
        return (SortedPartition, (dict(self),))

    def __setitem__(self, key: Any, value: Any) -> None:
        if key not in self:
            bisect.insort(self._keys, key)
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        self._forget(key)

    def pop(self, key: Any, *default: Any) -> Any:
        present = key in self
        value = super().pop(key, *default)
        if present:
            self._forget(key)
        return value

    def popitem(self) -> tuple[Any, Any]:
        key, value = super().popitem()
        self._forget(key)
        return key, value

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> SortedPartition:
        self.update(other)
        return self

    def clear(self) -> None:
        super().clear()
        self._keys.clear()

    def _forget(self, key: Any) -> None:
        at = bisect.bisect_left(self._keys, key)
        if at < len(self._keys) and self._keys[at] == key:
            del self._keys[at]

    def run(self, comparison: str, bounds: list[Any]) -> dict[Any, Any] | None:
        """``_in_key_range``'s answer by bisection: the run meeting the condition and its two neighbours."""
        keys = self._keys
        low = bounds[0]
        if comparison in _RUN_FROM_FIRST:
            strict = comparison in ("LT", "<")
            start, end = 0, (bisect.bisect_left if strict else bisect.bisect_right)(keys, low)
        elif comparison in _RUN_TO_LAST:
            strict = comparison in ("GT", ">")
            start, end = (bisect.bisect_right if strict else bisect.bisect_left)(keys, low), len(keys)
        elif comparison in ("EQ", "="):
            start, end = bisect.bisect_left(keys, low), bisect.bisect_right(keys, low)
        elif comparison == "BETWEEN" and len(bounds) == 2:
            start, end = bisect.bisect_left(keys, low), bisect.bisect_right(keys, bounds[1])
            end = max(start, end)
        elif comparison == "BEGINS_WITH":
            start = end = bisect.bisect_left(keys, low)
            while end < len(keys) and keys[end].value.startswith(low.value):
                end += 1
        else:
            return None
        first, last = max(start - 1, 0), min(end + 1, len(keys))
        return {key: self[key] for key in keys[first:last]}


def _in_key_range(part: dict[Any, Any], comparison: str, bounds: list[Any]) -> dict[Any, Any]:
    """The items whose sort key meets the key condition, and the nearest item on either side of them.

    A sort key condition selects a contiguous run of the partition in sort-key order. moto's query
    walks the whole partition in that order (sizing every item) and keeps the run; it stops at the
    first item after the ``Limit``-th kept one, whichever that is. Handing it the run and its two
    neighbours gives it the same items in the same order up to any point where it can stop: the same
    page, the same ``LastEvaluatedKey``.
    """
    if isinstance(part, SortedPartition) and all(getattr(b, "type", None) == "S" for b in bounds):
        run = part.run(comparison, bounds)
        if run is not None:
            return run
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


def query_partition(original: Any) -> Any:
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


def patch_query() -> None:
    """Answer base-table queries from the partition asked for (idempotent)."""
    from moto.dynamodb.models.table import Table

    if not _ORIGINALS:
        _ORIGINALS.append(Table.__dict__.get("query"))
        Table.query = query_partition(Table.query)  # type: ignore[method-assign]


def unpatch_query() -> None:
    """Put moto's own ``Table.query`` back."""
    from moto.dynamodb.models.table import Table

    if _ORIGINALS:
        original = _ORIGINALS.pop()
        if original is None:
            delattr(Table, "query")
        else:
            Table.query = original  # type: ignore[method-assign]

"""Bounded, thread-safe LRU caches of a trial: decoded values, and raw event-file blocks.

Both are bounded in bytes (not entries) because tensors range from scalars to
hundreds of megabytes; an item larger than the whole budget is not cached.
``TieredValueCache`` puts a trial's own value cache in front of one that outlives
the trial (the serverless evaluator's warm process builds one trial per step).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

__all__ = [
    "ValueCache",
    "TieredValueCache",
    "BlockCache",
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_BLOCK_CACHE_BYTES",
    "ENTRY_OVERHEAD",
]

#: Default budget of the value cache, in bytes of numpy data.
DEFAULT_CACHE_BYTES = 256 * 1024 * 1024
#: Default budget of the raw block cache (read-ahead windows).
DEFAULT_BLOCK_CACHE_BYTES = 32 * 1024 * 1024
#: Bytes a long-lived value cache counts per entry besides the array's data (measured: ~460 for a step's
#: scalar keyed by its location), so a cache of many scalars stays within its budget in memory too.
ENTRY_OVERHEAD = 512


class ValueCache:
    """Thread-safe LRU of numpy arrays bounded by their total ``nbytes``.

    Cached arrays are shared by every reader of the trial, so :meth:`put` makes
    them read-only: an in-place change raises instead of corrupting later reads.
    ``entry_overhead``: bytes counted per entry on top of ``nbytes`` (its key, the array
    object, the dict slot: about 460 bytes for a step's scalar), for a cache that lives
    long enough to hold many small values (``ENTRY_OVERHEAD``); 0 for a trial's own.

    Examples
    --------
    >>> c = ValueCache(max_bytes=16)
    >>> c.put("a", np.zeros(2)); c.put("b", np.zeros(2)); c.get("a") is None
    True
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES, entry_overhead: int = 0) -> None:
        self.max_bytes = max_bytes
        self.entry_overhead = entry_overhead
        self._data: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> np.ndarray | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: Hashable, value: np.ndarray) -> None:
        size = value.nbytes + self.entry_overhead
        if size > self.max_bytes:
            return
        value.setflags(write=False)
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._size -= int(old.nbytes) + self.entry_overhead
            self._data[key] = value
            self._size += size
            while self._size > self.max_bytes and self._data:
                _, evicted = self._data.popitem(last=False)
                self._size -= int(evicted.nbytes) + self.entry_overhead

    def discard_where(self, stale: Callable[[Hashable], bool]) -> int:
        """Drop every entry whose key is ``stale`` (values of a file written again); how many."""
        with self._lock:
            keys = [k for k in self._data if stale(k)]
            for k in keys:
                self._size -= int(self._data.pop(k).nbytes) + self.entry_overhead
            return len(keys)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)


class TieredValueCache:
    """A trial's own ``ValueCache`` in front of a ``shared`` one that other trials use too.

    Why: the evaluator builds a new trial for every step, so values a rule read at
    step N-1 (DeadRelu pooling one-sample ReLU outputs back over 32 steps, the
    previous weights of WeightUpdateRatio) would be fetched and decoded again at
    step N. Event files never change once written (the writer publishes each
    one before its index file, and never rewrites it), so a value decoded for
    one step's trial is the same for the next: every decoded value goes into
    both caches, a miss of the own cache is looked up in the shared one. Both
    keep the same read-only array, so nothing is stored twice. (A resumed run
    re-saving a step does rewrite its files: the evaluator then drops their
    values, ``ValueCache.discard_where``, before it reads the step again.)

    Examples
    --------
    >>> shared = ValueCache(max_bytes=64)
    >>> TieredValueCache(ValueCache(), shared).put("a", np.zeros(2))
    >>> TieredValueCache(ValueCache(), shared).get("a")
    array([0., 0.])
    """

    def __init__(self, own: ValueCache, shared: ValueCache) -> None:
        self.own = own
        self.shared = shared

    def get(self, key: Hashable) -> np.ndarray | None:
        value = self.own.get(key)
        return self.shared.get(key) if value is None else value

    def put(self, key: Hashable, value: np.ndarray) -> None:
        self.own.put(key, value)
        self.shared.put(key, value)

    def __contains__(self, key: Hashable) -> bool:
        return key in self.own or key in self.shared

    def __len__(self) -> int:
        return len(self.own)


class BlockCache:
    """Thread-safe LRU of raw byte ranges ``[start, start + len)`` of event files, bounded in total size.

    Examples
    --------
    >>> c = BlockCache(max_bytes=10)
    >>> c.put("f", 100, b"abcdef")
    >>> bytes(c.find("f", 102, 104)), c.find("f", 104, 107) is None
    (b'cd', True)
    """

    def __init__(self, max_bytes: int = DEFAULT_BLOCK_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._lru: OrderedDict[tuple[str, int], int] = OrderedDict()  # (path, start) -> size
        self._by_path: dict[str, dict[int, bytes]] = {}
        self._size = 0
        self._lock = threading.Lock()

    def find(self, path: str, start: int, end: int) -> memoryview | None:
        """The bytes ``[start, end)`` of ``path`` if one cached block holds them all."""
        with self._lock:
            for block_start, data in self._by_path.get(path, {}).items():
                if block_start <= start and end <= block_start + len(data):
                    self._lru.move_to_end((path, block_start))
                    return memoryview(data)[start - block_start : end - block_start]
        return None

    def put(self, path: str, start: int, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        with self._lock:
            self._drop((path, start))
            self._by_path.setdefault(path, {})[start] = data
            self._lru[(path, start)] = len(data)
            self._size += len(data)
            while self._size > self.max_bytes:
                self._drop(next(iter(self._lru)))

    def _drop(self, key: tuple[str, int]) -> None:
        size = self._lru.pop(key, None)
        if size is None:
            return
        self._size -= size
        blocks = self._by_path[key[0]]
        del blocks[key[1]]
        if not blocks:
            del self._by_path[key[0]]

    def __len__(self) -> int:
        return len(self._lru)

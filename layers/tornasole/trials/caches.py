"""Bounded, thread-safe LRU caches of a trial: decoded values, and raw event-file blocks.

Both are bounded in bytes (not entries) because tensors range from scalars to
hundreds of megabytes; an item larger than the whole budget is not cached.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

import numpy as np

__all__ = ["ValueCache", "BlockCache", "DEFAULT_CACHE_BYTES", "DEFAULT_BLOCK_CACHE_BYTES"]

#: Default budget of the value cache, in bytes of numpy data.
DEFAULT_CACHE_BYTES = 256 * 1024 * 1024
#: Default budget of the raw block cache (read-ahead windows).
DEFAULT_BLOCK_CACHE_BYTES = 32 * 1024 * 1024


class ValueCache:
    """Thread-safe LRU of numpy arrays bounded by their total ``nbytes``.

    Cached arrays are shared by every reader of the trial, so :meth:`put` makes
    them read-only: an in-place change raises instead of corrupting later reads.

    Examples
    --------
    >>> c = ValueCache(max_bytes=16)
    >>> c.put("a", np.zeros(2)); c.put("b", np.zeros(2)); c.get("a") is None
    True
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
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
        size = value.nbytes
        if size > self.max_bytes:
            return
        value.setflags(write=False)
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._size -= int(old.nbytes)
            self._data[key] = value
            self._size += size
            while self._size > self.max_bytes and self._data:
                _, evicted = self._data.popitem(last=False)
                self._size -= int(evicted.nbytes)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)


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

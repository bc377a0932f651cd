"""Read-ahead for remote trials: one request for a record and its neighbours in the same event file.

On S3 a request costs tens of milliseconds whatever its size, so a user loop
such as ``for name in names: for step in steps: tensor(name).value(step)``
would pay one GET per value. When a value is missed, the reader instead fetches
a window of neighbouring records of the *same* event file (at most
``readahead_bytes``, never more than that event file) and keeps the raw bytes in
a small LRU; later values of that file are decoded from memory. Locally a read
is a cheap system call and the window would only add I/O, so local trials do
not read ahead (``create_trial(..., readahead_bytes=...)`` overrides either way).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from tornasole.trials.step_index import RecordLocation

__all__ = ["BlockCache", "readahead_span", "DEFAULT_READAHEAD_BYTES", "DEFAULT_BLOCK_CACHE_BYTES"]

#: Read-ahead window of remote (S3) trials.
DEFAULT_READAHEAD_BYTES = 1024 * 1024
#: Budget of the raw block cache.
DEFAULT_BLOCK_CACHE_BYTES = 32 * 1024 * 1024


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
        self._blocks: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def find(self, path: str, start: int, end: int) -> memoryview | None:
        """The bytes ``[start, end)`` of ``path`` if one cached block holds them all."""
        with self._lock:
            for (p, block_start), data in reversed(self._blocks.items()):
                if p == path and block_start <= start and end <= block_start + len(data):
                    self._blocks.move_to_end((p, block_start))
                    return memoryview(data)[start - block_start : end - block_start]
        return None

    def put(self, path: str, start: int, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        with self._lock:
            old = self._blocks.pop((path, start), None)
            if old is not None:
                self._size -= len(old)
            self._blocks[(path, start)] = data
            self._size += len(data)
            while self._size > self.max_bytes:
                _, evicted = self._blocks.popitem(last=False)
                self._size -= len(evicted)

    def __len__(self) -> int:
        return len(self._blocks)


def readahead_span(loc: RecordLocation, neighbors: Sequence[RecordLocation], budget: int) -> tuple[int, int]:
    """The byte window to read for ``loc``: it plus adjacent records of its event file, within ``budget``.

    Records are taken in file order, first after ``loc`` then before it, while
    the window stays within ``budget`` bytes; bytes between them (records no
    longer indexed, such as earlier copies of a repeated tag) are read too.
    """
    start, end = loc.start, loc.start + loc.length
    same = sorted((n for n in neighbors if n.event_path == loc.event_path), key=lambda n: n.start)
    for n in same:
        if n.start >= end and n.start + n.length - start <= budget:
            end = n.start + n.length
    for n in reversed(same):
        if n.start + n.length <= start and end - n.start <= budget:
            start = n.start
    return start, end

"""Index files read for earlier steps, kept across the steps a warm evaluator handles.

Why: a rule that reads earlier steps needs their index files in the step's
trial, so without a cache every step re-reads its whole history window (e.g.
11 GetObjects for LossNotDecreasing, 22 for Overtraining) although step N's
window is step N-1's shifted by one. Index files never change once written
(the writer's ordering contract publishes each one once, atomically, after its
event file), so a warm process may keep their bytes: each step then reads its
own index file and only the earlier ones it has not seen. The exception is a
resumed run re-saving steps into the same keys: the evaluator then forgets the
rewritten step's files (``discard``, through ``StepRunner.forget``) before it
evaluates the step again.

``CachingStorage`` wraps the trial's backend for one step; reads of whole index
files go through the process-wide ``IndexFileCache`` (an LRU bounded in bytes),
everything else (ranged event-file reads, listings, writes) passes through.
A missing or failed read is never cached.

The worker's collections file, which every step's trial reads, is kept the same
way (one GetObject per step saved): the format writes it once per worker, early,
and never changes it, the same contract as index files. It is not capped here:
it is read as asked, whole or bounded from its start (the trial reads it bounded,
``MAX_COLLECTIONS_BYTES + 1``); a bounded read is kept only when it returned fewer
bytes than it asked for (so it holds the whole file), and a kept file serves a
later bounded read with its first bytes, exactly what S3 would return.

Index files are also read with a size cap: the read asks for at most
``MAX_INDEX_BYTES + 1`` bytes, and a file that is larger is an error for its
step (recorded like a corrupt one), so a hostile 18 MiB index file costs a
bounded read, never a decode of its whole body.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Literal

from tornasole.format import paths
from tornasole.storage.base import ReadRequest

if TYPE_CHECKING:
    from tornasole.storage.base import Storage

__all__ = ["CachingStorage", "IndexFileCache", "DEFAULT_CACHE_BYTES", "MAX_INDEX_BYTES", "FileTooLarge"]

#: Largest index file the evaluator reads (about 80 bytes per tensor: room for ~50,000 tensors).
MAX_INDEX_BYTES = 4 * 1024 * 1024


class FileTooLarge(ValueError):
    """A file the evaluator reads whole is larger than its cap."""


# An index file is about 80 bytes per tensor: 32 MiB keeps ~8,000 files of 50 tensors, far more than
# the history windows of the jobs one warm Lambda serves, and a small part of its memory.
DEFAULT_CACHE_BYTES = 32 * 1024 * 1024


class IndexFileCache:
    """Thread-safe LRU of whole index files by full path, bounded by total bytes."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, path: str) -> bytes | None:
        with self._lock:
            data = self._items.get(path)
            if data is not None:
                self._items.move_to_end(path)
            return data

    def discard(self, path: str) -> None:
        """Forget ``path`` (its file was written again: a resumed run re-saving a step)."""
        with self._lock:
            old = self._items.pop(path, None)
            if old is not None:
                self.size -= len(old)

    def put(self, path: str, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(path, None)
            self.size += len(data) - (len(old) if old is not None else 0)
            self._items[path] = data
            while self.size > self.max_bytes:
                _, evicted = self._items.popitem(last=False)
                self.size -= len(evicted)

    @staticmethod
    def cacheable(request: ReadRequest) -> bool:
        """Whole reads of index files only (event files are read by ranges, once per step)."""
        return (
            request.start is None
            and request.end is None
            and paths.parse_index_file_name(request.path) is not None
        )

    @staticmethod
    def kept_whole(request: ReadRequest) -> bool:
        """Reads of collections files, whole or from byte 0: kept like index files, read without a cap."""
        return request.start in (None, 0) and paths.parse_collections_file_name(request.path) is not None

    @staticmethod
    def holds_whole_file(request: ReadRequest, data: bytes) -> bool:
        """Whether ``data``, read for ``request``, is its whole file (a bounded read from 0 cut short)."""
        return request.end is None or (request.start in (None, 0) and len(data) < request.end)


class CachingStorage:
    """A ``Storage`` serving whole index-file reads from an ``IndexFileCache``; the rest passes through."""

    def __init__(self, inner: Storage, cache: IndexFileCache, max_index_bytes: int = MAX_INDEX_BYTES) -> None:
        self.inner = inner
        self.cache = cache
        self.max_index_bytes = max_index_bytes

    def read(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        return self.read_many([ReadRequest(path, start, end)])[0]  # type: ignore[return-value]

    def read_many(
        self, requests: Sequence[ReadRequest], on_error: Literal["raise", "return"] = "raise"
    ) -> list[bytes | BaseException]:
        out: list[bytes | BaseException | None] = [None] * len(requests)
        missing: list[int] = []
        for i, req in enumerate(requests):
            keep = self.cache.cacheable(req) or self.cache.kept_whole(req)
            hit = self.cache.get(req.path) if keep else None
            if hit is None:
                missing.append(i)
            else:
                out[i] = hit if req.end is None else hit[: req.end]  # a bounded read from 0: its first bytes
        if missing:
            capped = [
                ReadRequest(requests[i].path, 0, self.max_index_bytes + 1)
                if self.cache.cacheable(requests[i])
                else requests[i]
                for i in missing
            ]
            fetched = self.inner.read_many(capped, on_error=on_error)
            for i, data in zip(missing, fetched, strict=True):
                too_large = isinstance(data, bytes) and len(data) > self.max_index_bytes
                if too_large and self.cache.cacheable(requests[i]):
                    data = FileTooLarge(
                        f"{requests[i].path}: index file larger than {self.max_index_bytes} bytes"
                    )
                    if on_error == "raise":
                        raise data
                out[i] = data
                keep = self.cache.cacheable(requests[i]) or (
                    self.cache.kept_whole(requests[i])
                    and isinstance(data, bytes)
                    and self.cache.holds_whole_file(requests[i], data)
                )
                if isinstance(data, bytes) and keep:
                    self.cache.put(requests[i].path, data)
        return out  # type: ignore[return-value]

    def write_atomic(self, path: str, data: bytes) -> None:
        self.inner.write_atomic(path, data)

    def list(self, prefix: str, start_after: str | None = None) -> Iterator[str]:
        return self.inner.list(prefix, start_after)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def delete(self, path: str) -> None:
        self.inner.delete(path)

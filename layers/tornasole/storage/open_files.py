"""Descriptors of recently read local files, kept open between ranged reads.

A trial reads one record per value: ``open`` + ``pread`` + ``close`` per value
spends more time opening and closing than copying the record. Rules read step
by step (several records of one event file in a row) and analysis loops read
tensor by tensor (every event file once per tensor), so an LRU of descriptors
turns most reads into a single ``pread``.

Correctness: a descriptor goes on reading the file it was opened on. Writers
publish atomically (a temporary file renamed over the path, ours and smdebug's
alike) or delete, and either leaves the old file with no links; every read of a
cached descriptor checks ``st_nlink`` and reopens the path when it dropped to 0,
so a read never returns bytes of a replaced file.

Threads: reads on ``read_many``'s pool share descriptors. A descriptor is closed
only once no read is using it (a count of users), so a descriptor number is
never closed, and reused by another ``open``, under a running ``pread``.

Bounds: at most ``capacity`` descriptors (default an eighth of the process's
soft ``RLIMIT_NOFILE``, at most 1024); should an ``open`` still fail with
``EMFILE``, the idle cached descriptors are closed first and the open retried.
"""

from __future__ import annotations

import errno
import os
import threading
from collections import OrderedDict

__all__ = ["OpenFiles", "default_capacity", "pread_all"]

#: Most descriptors a cache keeps open, whatever the descriptor limit.
MAX_CAPACITY = 1024


def default_capacity() -> int:
    """An eighth of the soft descriptor limit, at most ``MAX_CAPACITY`` (64 where it cannot be read)."""
    try:
        import resource  # POSIX only

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 64
    if soft == resource.RLIM_INFINITY:
        return MAX_CAPACITY
    return max(0, min(MAX_CAPACITY, soft // 8))


def pread_all(fd: int, size: int, offset: int, path: str) -> bytes:
    """``size`` bytes at ``offset`` of ``fd`` (fewer at the end of the file); errors name ``path``."""
    try:
        data = os.pread(fd, size, offset)
        if 0 < len(data) < size:  # a huge read is capped by the kernel (about 2 GiB): go on
            parts = [data]
            got = len(data)
            while got < size:
                chunk = os.pread(fd, size - got, offset + got)
                if not chunk:
                    break
                parts.append(chunk)
                got += len(chunk)
            data = b"".join(parts)
    except OSError as exc:
        if exc.filename is None:  # e.g. EISDIR from pread: name the file, keep the errno
            raise type(exc)(exc.errno, exc.strerror, path) from exc
        raise
    return data


class _Entry:
    """One open descriptor: how many reads use it, and whether it left the cache."""

    __slots__ = ("fd", "users", "retired")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.users = 1
        self.retired = False


class OpenFiles:
    """Thread-safe LRU of read-only descriptors by path.

    Examples
    --------
    >>> files = OpenFiles(capacity=8)
    >>> files.pread("/etc/hostname", 4, 0)  # doctest: +SKIP
    b'host'
    >>> files.close()
    """

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = default_capacity() if capacity is None else capacity
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def pread(self, path: str, size: int, offset: int) -> bytes:
        """``size`` bytes at ``offset`` of the file now at ``path`` (fewer past its end)."""
        with self._lock:  # _acquire's cache hit, inline: this runs once per value a trial reads
            entry = self._entries.get(path)
            if entry is not None:
                self._entries.move_to_end(path)
                entry.users += 1
        fresh = entry is None
        if fresh:
            entry, fresh = self._acquire(path)
        try:
            if fresh or os.fstat(entry.fd).st_nlink:
                data = os.pread(entry.fd, size, offset)
                return data if len(data) == size else pread_all(entry.fd, size, offset, path)
            self._retire(path, entry)  # replaced or deleted since it was opened
        except OSError as exc:
            if exc.filename is None:  # e.g. EISDIR: name the file, keep the errno
                raise type(exc)(exc.errno, exc.strerror, path) from exc
            raise
        finally:
            self._release(entry)
        entry, _ = self._acquire(path)  # the file now at path (FileNotFoundError if deleted)
        try:
            return pread_all(entry.fd, size, offset, path)
        finally:
            self._release(entry)

    def forget(self, path: str) -> None:
        """Stop caching ``path`` (its owner is about to replace or delete it)."""
        if path not in self._entries:  # a writer's new file: no lock (a read opening it now is as late)
            return
        with self._lock:
            entry = self._entries.get(path)
            if entry is not None:
                self._retire_locked(path, entry)

    def close(self) -> None:
        """Close every idle descriptor now and the busy ones as their reads finish; stays usable."""
        with self._lock:
            for path, entry in list(self._entries.items()):
                self._retire_locked(path, entry)

    def __len__(self) -> int:
        return len(self._entries)

    # -- internals -------------------------------------------------------------------------------
    def _acquire(self, path: str) -> tuple[_Entry, bool]:
        """The entry for ``path`` with one more user, and whether it was opened just now."""
        with self._lock:
            entry = self._entries.get(path)
            if entry is not None:
                self._entries.move_to_end(path)
                entry.users += 1
                return entry, False
        fd = self._open(path)
        with self._lock:
            current = self._entries.get(path)
            if current is not None:  # another thread opened it meanwhile: share theirs
                current.users += 1
                os.close(fd)
                return current, False
            entry = self._entries[path] = _Entry(fd)
            while len(self._entries) > self.capacity:
                old_path, old = next(iter(self._entries.items()))
                self._retire_locked(old_path, old)
        return entry, True

    def _open(self, path: str) -> int:
        try:
            return os.open(path, os.O_RDONLY)
        except OSError as exc:
            if exc.errno != errno.EMFILE or not self._entries:
                raise
        self.close()  # out of descriptors: give ours back, then try once more
        return os.open(path, os.O_RDONLY)

    def _release(self, entry: _Entry) -> None:
        with self._lock:
            entry.users -= 1
            if entry.retired and entry.users == 0:
                os.close(entry.fd)

    def _retire(self, path: str, entry: _Entry) -> None:
        with self._lock:
            if self._entries.get(path) is entry:
                self._retire_locked(path, entry)

    def _retire_locked(self, path: str, entry: _Entry) -> None:
        """Take ``entry`` out of the cache; close it now if idle, else when its last read ends."""
        del self._entries[path]
        entry.retired = True
        if entry.users == 0:
            os.close(entry.fd)

"""Local-filesystem backend of the :class:`~tornasole.storage.base.Storage` protocol.

Writes are atomic (a temporary file next to the target, then ``os.replace``)
so a reader polling a live trial never sees half an index file. Listing is a
lexicographic walk that prunes whole directories sorting at or before
``start_after``: a live trial with thousands of steps is re-listed in time
proportional to what is new, not to the whole tree.

Ranged reads are the trial's hot path (one record per tensor value): they are
one ``os.pread`` on a descriptor kept open by :class:`~tornasole.storage.open_files.OpenFiles`
(checked on every read against replacement), not ``open()``'s buffered file
object per read (five times the cost). Whole-file reads (index and collections
files, read once each) open and close their file.
Batches (``read_many``) are read inline while reads come back at page-cache
speed and go to the thread pool from the first one that waited for a device:
threads help reads that wait for a disk or a network file system, while for
cached data the hand-off costs more than the copy. "Waited" is a slow read
during which the thread slept (its voluntary context switches went up), so
being preempted on a busy machine does not send a cached batch to the pool.
"""

from __future__ import annotations

import itertools
import mmap
import os
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Literal

from tornasole.storage.base import ReadRequest
from tornasole.storage.mapped_files import MappedFiles
from tornasole.storage.open_files import OpenFiles, pread_all
from tornasole.storage.paths import to_local
from tornasole.storage.threaded import ThreadedReads

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)

try:
    from resource import RUSAGE_THREAD, getrusage
except ImportError:  # not Linux: every slow read counts as a wait
    RUSAGE_THREAD = None

__all__ = ["LocalStorage"]

# ``<name>.tmp.<uuid hex>`` (ours) and ``<name>.tmp`` (smdebug's in-progress files).
_TEMP_NAME = re.compile(r"\.tmp(\.[0-9a-f]{32})?$")
_HAS_PREAD = hasattr(os, "pread")
#: A read of a batch slower than this that slept waited for a device: the rest go to threads.
INLINE_READ_S = 0.0005


def _make_dir(path: str) -> None:
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(path, exist_ok=True)


# Temporary names: 32 hex digits, a random per-process half and a counter (uuid4 drew random bytes
# and built a UUID object for every write); a forked child draws its own half.
_TEMP_PREFIX = [os.urandom(8).hex()]
_temp_counter = itertools.count()


def _temp_suffix() -> str:
    return f"{_TEMP_PREFIX[0]}{next(_temp_counter):016x}"


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _TEMP_PREFIX.__setitem__(0, os.urandom(8).hex()))


class LocalStorage(ThreadedReads):
    """Read, write and list files on the local filesystem.

    Paths are OS paths, optionally prefixed with ``file://``; listed paths come
    back without the scheme.

    Parameters
    ----------
    max_workers : int, optional
        Threads used by :meth:`read_many`; default ``$TORNASOLE_READ_THREADS`` or 16.
    open_files : int, optional
        Descriptors kept open for ranged reads (see :mod:`tornasole.storage.open_files`);
        default an eighth of the descriptor limit, at most 1024.

    Examples
    --------
    >>> storage = LocalStorage()
    >>> storage.write_atomic("/tmp/run/index/a.json", b"{}")  # doctest: +SKIP
    >>> list(storage.list("/tmp/run/index/"))  # doctest: +SKIP
    ['/tmp/run/index/a.json']
    """

    def __init__(self, max_workers: int | None = None, open_files: int | None = None) -> None:
        super().__init__(max_workers, default_workers=16)
        self._files = OpenFiles(open_files)
        self._maps = MappedFiles()
        self._dirs: set[str] = set()  # directories write_atomic made or found (a bounded memo)

    def close(self) -> None:
        """Shut the read pool down and close the cached descriptors; the instance stays usable."""
        super().close()
        self._files.close()
        self._maps.close()

    def view(self, path: str) -> memoryview:
        """A read-only view of the whole file at ``path``, mapped once and kept (LRU).

        For files that are immutable once published (event files, see
        :mod:`tornasole.storage.mapped_files`); :meth:`forget_view` drops the
        mapping so the next call sees the file now at ``path``. Not part of the
        Storage protocol: only local files can be mapped.
        """
        local = path if isinstance(path, str) and path[:1] == "/" else to_local(path)
        return self._maps.view(local)

    @property
    def mapped_views(self) -> Mapping[str, memoryview]:
        """Absolute path -> view of the files mapped so far (read-only): :meth:`view` without a call."""
        return self._maps.mapped

    @property
    def mapped_files(self) -> Mapping[str, mmap.mmap | bytes]:
        """Absolute path -> the ``mmap`` under each of :attr:`mapped_views` (slices are ``bytes``)."""
        return self._maps.mapped_files

    def forget_view(self, path: str) -> None:
        """Drop the mapping of ``path`` (see :meth:`view`)."""
        local = path if isinstance(path, str) and path[:1] == "/" else to_local(path)
        self._maps.forget(local)

    def read(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        """Bytes ``[start, end)`` of ``path`` (whole file when both are None); short past the end."""
        start = 0 if start is None else start
        if start < 0 or (end is not None and end < 0):
            raise ValueError(f"negative byte range [{start}, {end}) for {path!r}")
        local = path if isinstance(path, str) and path[:1] == "/" else to_local(path)
        if not _HAS_PREAD:  # Windows: no pread, a plain buffered read
            with open(local, "rb") as f:
                f.seek(start)
                return f.read() if end is None else f.read(max(0, end - start))
        if end is not None:  # a record of an event file: through the descriptor cache
            return self._files.pread(local, max(0, end - start), start)
        fd = os.open(local, os.O_RDONLY)  # whole files (index, collections) are read once
        try:
            size = os.fstat(fd).st_size
            return pread_all(fd, size - start, start, local) if size > start else b""
        finally:
            os.close(fd)

    def read_many(
        self, requests: Sequence[ReadRequest], on_error: Literal["raise", "return"] = "raise"
    ) -> list[bytes | BaseException]:
        """Read every request, concurrently once reads wait for a device; results in request order.

        Requests are read inline, in order, while they come from the page cache
        (microseconds, well under a thread hand-off). The first read that took
        over ``INLINE_READ_S`` *and* put this thread to sleep (a cold disk, a
        network file system; being preempted by another process does not count)
        sends the rest of the batch to the thread pool. Errors follow
        ``on_error`` as in the protocol.
        """
        requests = list(requests)
        if on_error not in ("raise", "return") or len(requests) <= 1:
            return self._run_batch(requests, on_error, self._read_request)
        out: list[bytes | BaseException] = []
        clock = time.perf_counter
        sleeps = _sleeps()
        for i, request in enumerate(requests):
            began = clock()
            try:
                out.append(self.read(request.path, request.start, request.end))
            except Exception as exc:
                if on_error == "raise":
                    raise
                out.append(exc)
            if clock() - began > INLINE_READ_S and i + 1 < len(requests) and _slept_since(sleeps):
                return out + self._run_batch(requests[i + 1 :], on_error, self._read_request)
        return out

    def _read_request(self, request: ReadRequest) -> bytes:
        return self.read(request.path, request.start, request.end)

    def make_dirs(self, paths: Sequence[str]) -> None:
        """Create the directories ``paths`` (their parents first if missing; existing ones are fine), in
        one burst, for files :meth:`write_atomic` will put there.

        A writer creating one directory per step pays a cold ``mkdir`` each time (about 4x a warm one
        inside a training loop, ``bench/statistics_overhead.py``); made a batch at a time, most are warm.
        Not part of the Storage protocol: object stores have no directories.
        """
        for path in paths:
            local = path if path[:1] == "/" else to_local(path)
            _make_dir(local)
            self._remember_dir(local)

    def remove_empty_dirs(self, paths: Sequence[str]) -> None:
        """Remove each of ``paths`` that is an empty directory (one :meth:`make_dirs` made for a file that
        never came); a directory that holds anything, or is gone, is left as it is."""
        for path in paths:
            local = path if path[:1] == "/" else to_local(path)
            self._dirs.discard(local)
            try:
                os.rmdir(local)
            except OSError:
                pass

    def _remember_dir(self, path: str) -> None:
        if len(self._dirs) >= 256:
            self._dirs.clear()
        self._dirs.add(path)

    def write_atomic(self, path: str, data: bytes) -> None:
        """Write ``data`` to a temporary sibling, then rename it over ``path`` (parents created)."""
        target = path if isinstance(path, str) and path[:1] == "/" else to_local(path)
        tmp = f"{target}.tmp.{_temp_suffix()}"
        # os.open/os.write: five system calls a file (open() adds fstat, ioctl and lseek; makedirs adds
        # a stat). A parent not known to exist is made first: a hook writes each step's event file
        # into a new directory (mkdir, then open; not a failing open, a stat, mkdir and open again).
        parent = os.path.dirname(target)
        if parent and parent not in self._dirs:
            _make_dir(parent)
            self._remember_dir(parent)
        try:
            fd = os.open(tmp, _CREATE, 0o666)
        except FileNotFoundError:  # the parent was removed since
            if not parent:
                raise
            os.makedirs(parent, exist_ok=True)
            fd = os.open(tmp, _CREATE, 0o666)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            self._files.forget(target)
            self._maps.forget(target)
            os.replace(tmp, target)
        except BaseException:
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise

    def list(self, prefix: str, start_after: str | None = None) -> Iterator[str]:
        """Files whose path starts with ``prefix``, in lexicographic order, after ``start_after``.

        ``prefix`` is a plain string prefix, as on S3: ``/run/index/`` lists a
        directory, ``/run/index/000000000/00000000001`` a partial file name
        (and ``/run/index`` would also match a sibling ``/run/index2/``).
        Temporary files of in-progress writes are skipped. A missing directory
        lists nothing.
        """
        prefix = to_local(prefix)
        after = to_local(start_after) if start_after is not None else None
        cut = prefix.rfind("/") + 1  # "/run/index/00" -> base "/run/index/", name prefix "00"
        return self._walk(prefix[:cut], prefix[cut:], after)

    def _walk(self, base: str, name_prefix: str, after: str | None) -> Iterator[str]:
        """Yield files in directory ``base`` (``""`` = cwd) and below, in full-path order.

        Entries are sorted on ``name`` for files and ``name + "/"`` for
        directories: every path below ``d`` starts with ``d/``, so that key
        puts the subtree exactly where its paths sort (``a-b`` before ``a/x``).
        """
        try:
            with os.scandir(base or ".") as it:
                entries = [(e.name, e.is_dir()) for e in it if e.name.startswith(name_prefix)]
        except (FileNotFoundError, NotADirectoryError):
            return
        entries.sort(key=lambda e: e[0] + "/" if e[1] else e[0])
        for name, is_dir in entries:
            full = base + name
            if not is_dir:
                if (after is None or full > after) and not _TEMP_NAME.search(name):
                    yield full
                continue
            sub = full + "/"
            if after is None or sub > after:
                yield from self._walk(sub, "", None)  # everything below sorts after start_after
            elif after.startswith(sub):
                yield from self._walk(sub, "", after)  # start_after is inside: filter below
            # else: the whole subtree sorts at or before start_after, pruned unvisited

    def exists(self, path: str) -> bool:
        """Whether a regular file exists at ``path`` (directories do not count)."""
        return os.path.isfile(to_local(path))

    def delete(self, path: str) -> None:
        """Remove the file at ``path``; a missing file is not an error."""
        local = to_local(path)
        self._files.forget(local)
        self._maps.forget(local)
        try:
            os.remove(local)
        except FileNotFoundError:
            pass


def _sleeps() -> int:
    """Voluntary context switches of the calling thread so far (0 where unknown)."""
    return 0 if RUSAGE_THREAD is None else getrusage(RUSAGE_THREAD).ru_nvcsw


def _slept_since(before: int) -> bool:
    """Whether the calling thread slept since ``_sleeps()`` returned ``before`` (True where unknown)."""
    return RUSAGE_THREAD is None or getrusage(RUSAGE_THREAD).ru_nvcsw != before

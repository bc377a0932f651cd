"""Whole local files mapped into memory, for decoding many records of one file without a system call each.

A trial reads one record per value. Through ``pread`` each value costs a
system call and a copy into a fresh ``bytes``, plus a check that the file was
not replaced (an ``fstat``). Mapped, the records of an event file are slices
of one ``memoryview``: no call per value, and the only copy is the decode's.

Why this is safe for event files: by the format's contract an event file is
complete and immutable once it has its final name (ours and smdebug's writers
write a temporary file and rename it; a step is never re-written in place). A
mapping keeps showing the file it was made on, even after a rename replaced the
path, exactly as the index files the trial loaded describe that file. Readers
re-check only on error: :meth:`MappedFiles.forget` drops a mapping, and the next
:meth:`MappedFiles.view` maps the file now at the path (a record past the end of
a mapping, or one that does not decode, gets one such second look). The one
thing a mapping cannot survive is a file truncated *in place* while mapped
(``open(path, "w")`` over a published event file, which no writer of this format
does): touching the vanished pages faults the process (SIGBUS). Hence mappings
serve local event files only; index files, collections and anything remote are
read with ordinary reads.

Memory: a mapping costs address space, not memory; pages come from the page
cache when first touched, so reading one value touches that value's pages
only, whatever the size of its event file. At most ``capacity`` files stay
mapped (LRU); a dropped mapping is unmapped once no decode uses it.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping

__all__ = ["MappedFiles", "DEFAULT_MAPPED_FILES"]

#: Files kept mapped at once (one step of one worker each in a trial).
DEFAULT_MAPPED_FILES = 4096
_EMPTY = memoryview(b"")


class MappedFiles:
    """Thread-safe LRU of read-only ``memoryview``s of whole local files, by path.

    Examples
    --------
    >>> files = MappedFiles(capacity=4)
    >>> bytes(files.view("/etc/hostname")[:4])  # doctest: +SKIP
    b'host'
    """

    def __init__(self, capacity: int = DEFAULT_MAPPED_FILES) -> None:
        self.capacity = max(1, capacity)
        self._views: OrderedDict[str, memoryview] = OrderedDict()
        self._files: dict[str, mmap.mmap | bytes] = {}  # the same files, as the mappings themselves
        self._lock = threading.Lock()

    def view(self, path: str) -> memoryview:
        """The bytes of the file at ``path`` (as mapped when first asked; see the module docstring).

        Raises ``FileNotFoundError`` / ``OSError`` naming ``path``.
        """
        view = self._views.get(path)
        if view is not None:
            return view
        view = _map(path)
        with self._lock:
            self._views[path] = view
            self._files[path] = view.obj
            while len(self._views) > self.capacity:
                dropped, _ = self._views.popitem(last=False)  # unmapped when its last reader lets go
                self._files.pop(dropped, None)
        return view

    @property
    def mapped(self) -> Mapping[str, memoryview]:
        """The views mapped so far, by path (read-only): a hot loop's lookup before :meth:`view`."""
        return self._views

    @property
    def mapped_files(self) -> Mapping[str, mmap.mmap | bytes]:
        """The files mapped so far as the ``mmap`` objects under their views, by path (read-only).

        For the per-value hot loop: slicing an ``mmap`` gives ``bytes``, which
        compare and hash with ``memcmp`` where a ``memoryview`` slice is a new view
        compared item by item (the record scan slices a few times per value:
        measured 1.9 -> 1.3 us a record). Never write or close them; ``b""`` for an empty file.
        """
        return self._files

    def forget(self, path: str) -> None:
        """Drop the mapping of ``path``: the next :meth:`view` maps the file now there."""
        if path not in self._views:  # never mapped (a writer's new file): no lock
            return
        with self._lock:
            self._views.pop(path, None)
            self._files.pop(path, None)

    def close(self) -> None:
        """Drop every mapping (each is unmapped once no decode uses it); stays usable."""
        with self._lock:
            self._views.clear()
            self._files.clear()

    def __len__(self) -> int:
        return len(self._views)


def _map(path: str) -> memoryview:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return _EMPTY  # mmap cannot map an empty file
        return memoryview(mmap.mmap(fd, size, access=mmap.ACCESS_READ))
    except OSError as exc:
        if exc.filename is None:  # e.g. ENODEV for a directory: name the file, keep the errno
            raise type(exc)(exc.errno, exc.strerror, path) from exc
        raise
    finally:
        os.close(fd)

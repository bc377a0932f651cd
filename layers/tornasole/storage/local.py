"""Local-filesystem backend of the :class:`~tornasole.storage.base.Storage` protocol.

Writes are atomic (a temporary file next to the target, then ``os.replace``)
so a reader polling a live trial never sees half an index file. Listing is a
lexicographic walk that prunes whole directories sorting at or before
``start_after``: a live trial with thousands of steps is re-listed in time
proportional to what is new, not to the whole tree.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator, Sequence
from typing import Literal

from tornasole.storage.base import ReadRequest
from tornasole.storage.paths import to_local
from tornasole.storage.threaded import ThreadedReads

__all__ = ["LocalStorage"]

# ``<name>.tmp.<uuid hex>`` (ours) and ``<name>.tmp`` (smdebug's in-progress files).
_TEMP_NAME = re.compile(r"\.tmp(\.[0-9a-f]{32})?$")


class LocalStorage(ThreadedReads):
    """Read, write and list files on the local filesystem.

    Paths are OS paths, optionally prefixed with ``file://``; listed paths come
    back without the scheme.

    Parameters
    ----------
    max_workers : int, optional
        Threads used by :meth:`read_many`; default ``$TORNASOLE_READ_THREADS`` or 16.

    Examples
    --------
    >>> storage = LocalStorage()
    >>> storage.write_atomic("/tmp/run/index/a.json", b"{}")  # doctest: +SKIP
    >>> list(storage.list("/tmp/run/index/"))  # doctest: +SKIP
    ['/tmp/run/index/a.json']
    """

    def __init__(self, max_workers: int | None = None) -> None:
        super().__init__(max_workers, default_workers=16)

    def read(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        """Bytes ``[start, end)`` of ``path`` (whole file when both are None); short past the end."""
        start = 0 if start is None else start
        if start < 0 or (end is not None and end < 0):
            raise ValueError(f"negative byte range [{start}, {end}) for {path!r}")
        with open(to_local(path), "rb") as f:
            if start:
                f.seek(start)
            if end is None:
                return f.read()
            return f.read(end - start) if end > start else b""

    def read_many(
        self, requests: Sequence[ReadRequest], on_error: Literal["raise", "return"] = "raise"
    ) -> list[bytes | BaseException]:
        """Read every request concurrently; results in request order (see the protocol)."""
        return self._run_batch(requests, on_error, lambda r: self.read(r.path, r.start, r.end))

    def write_atomic(self, path: str, data: bytes) -> None:
        """Write ``data`` to a temporary sibling, then rename it over ``path`` (parents created)."""
        target = to_local(path)
        parent = os.path.dirname(target)
        if parent:
            os.makedirs(parent, exist_ok=True)
        tmp = f"{target}.tmp.{uuid.uuid4().hex}"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
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
        try:
            os.remove(to_local(path))
        except FileNotFoundError:
            pass

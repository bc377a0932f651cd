"""One read of one profiler file, with a size cap: a huge or hostile object gives an error naming it.

The cap is checked by asking for one byte more than it allows, so a 50 GB object costs one bounded
ranged GET (or ``pread``), never a download; storage has no ``stat`` and needs none.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tornasole.exceptions import FormatError
from tornasole.storage import Storage, get_storage

__all__ = ["MAX_FILE_BYTES", "ProfilerFileTooLarge", "read_profiler_file", "decoding"]

#: smdebug rotates a file at 10 MB by default (``MAX_FILE_SIZE_DEFAULT``): ten times that is no profiler file.
MAX_FILE_BYTES = 100 * 1024 * 1024


class ProfilerFileTooLarge(FormatError):
    """A file under ``profiler-output/`` is bigger than any profiler writes; it is not read."""


def read_profiler_file(
    path: str, *, storage: Storage | None = None, max_bytes: int = MAX_FILE_BYTES
) -> bytes:
    """The bytes of ``path``; :class:`ProfilerFileTooLarge` naming it past ``max_bytes``."""
    store = storage if storage is not None else get_storage(path)
    data = store.read(path, 0, max_bytes + 1)
    if len(data) > max_bytes:
        raise ProfilerFileTooLarge(
            f"{path}: profiler file is over {max_bytes} bytes (profilers rotate files at 10 MB); "
            "not reading it"
        )
    return data


@contextmanager
def decoding(source: str) -> Iterator[None]:
    """Decode inside this: JSON nested deeper than Python's recursion limit (a hostile file) becomes a
    :class:`FormatError` naming ``source`` instead of a bare ``RecursionError``."""
    try:
        yield
    except RecursionError:
        raise FormatError(f"{source}: JSON nested too deeply to be a profiler file") from None

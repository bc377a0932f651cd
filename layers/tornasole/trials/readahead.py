"""Read-ahead for remote trials: one request for a record and its neighbours in the same event file.

On S3 a request costs tens of milliseconds whatever its size, so a user loop
such as ``for name in names: for step in steps: tensor(name).value(step)``
would pay one GET per value. When a value is missed, the reader instead fetches
a window of neighbouring records of the *same* event file (at most
``readahead_bytes``, never more than that event file) and keeps the raw bytes in
a small LRU; later values of that file are decoded from memory. The same miss
also fetches, concurrently, the event files of the tensor's next steps
(``Tensor._read_ahead``, up to ``ValueReader.ahead_files``): a loop over a
tensor's steps then waits for one round of requests, not one per step. Locally a read
is a cheap system call and the window would only add I/O, so local trials do
not read ahead (``create_trial(..., readahead_bytes=...)`` overrides either way).
"""

from __future__ import annotations

from collections.abc import Sequence

from tornasole.trials.step_index import LOC_LENGTH, LOC_PATH, LOC_START, RecordLocation

__all__ = ["readahead_span", "DEFAULT_READAHEAD_BYTES"]

#: Read-ahead window of remote (S3) trials.
DEFAULT_READAHEAD_BYTES = 1024 * 1024


def readahead_span(
    path: str, start: int, end: int, neighbors: Sequence[RecordLocation], budget: int
) -> tuple[int, int]:
    """The window to read for bytes ``[start, end)`` of ``path``, widened over neighbouring records.

    Records of ``neighbors`` in the same event file are taken in file order,
    first after the window then before it, while it stays within ``budget`` bytes;
    bytes between them (records no longer indexed, such as earlier copies of a
    repeated tag) are read too.
    """
    same = sorted((n[LOC_START], n[LOC_START] + n[LOC_LENGTH]) for n in neighbors if n[LOC_PATH] == path)
    for first, last in same:
        if first >= end and last - start <= budget:
            end = last
    for first, last in reversed(same):
        if last <= start and end - first <= budget:
            start = first
    return start, end

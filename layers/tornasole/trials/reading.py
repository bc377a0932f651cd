"""Fetching tensor values from remote storage: ranged reads, concurrent batches, a bounded cache.

Local trials decode straight from mapped event files instead
(:mod:`tornasole.trials.local_reader`); this reader serves S3 and any other
backend (and local trials that ask for read-ahead).

smdebug reads whole event files (and on S3 lists the whole ``events/`` prefix)
for every value. The index already says exactly which bytes hold a record, so
we read exactly ``[start_idx, start_idx + length)`` (remote trials: a window of
neighbouring records of the same event file, see :mod:`tornasole.trials.readahead`):
reading a value never holds more than its event file in memory. Several values
are fetched with one ``storage.read_many`` call (threads), records of one event
file merged into one span, batches of bounded total size.

Decoded values are cached per trial, shared and read-only (``Tensor`` hands
out copies). Remote trials keep up to ``cache_bytes`` of them: a missed value
costs a request. A local trial keeps at most ``LOCAL_CACHE_BYTES``: the page
cache already holds the event files, a record is re-read and decoded in
microseconds, and a large cache only makes a streaming read slower (every
decoded value lands in fresh, cold memory instead of reusing buffers still in
the CPU cache: a loop over every value of a run was about 1.7x slower with
256 MiB of cache than with none). The small cache still serves what
is reused at once (a rule reading one value several times, reductions computed
from it).

Every failure becomes a tornasole exception naming the event file, the index
file that pointed at it, the step, the tensor and the byte offset.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from tornasole.exceptions import FormatError, IndexReaderException
from tornasole.format import event_records, tfrecord
from tornasole.storage import LocalStorage, ReadRequest, Storage
from tornasole.trials.caches import (
    DEFAULT_BLOCK_CACHE_BYTES,
    DEFAULT_CACHE_BYTES,
    BlockCache,
    TieredValueCache,
    ValueCache,
)
from tornasole.trials.readahead import readahead_span
from tornasole.trials.step_index import (
    LOC_LENGTH,
    LOC_PATH,
    LOC_START,
    LOC_STEP,
    LOC_TAG,
    RecordLocation,
)

__all__ = ["ValueReader", "decode_location", "read_error", "bare_message", "DEFAULT_CACHE_BYTES"]

Neighbors = Callable[[RecordLocation], Sequence[RecordLocation]]

#: Largest total size of one ``read_many`` batch, so a bulk prefetch stays bounded in memory.
BATCH_BYTES = 64 * 1024 * 1024
#: The same for a reader that does not read ahead (local): its reads are page-cache copies, so
#: small batches decoded while their bytes are still in the CPU cache beat one big batch.
LOCAL_BATCH_BYTES = 1048576
#: Records of one event file at most this many bytes apart are fetched with one ranged read.
SPAN_GAP = 256 * 1024
#: Most event files fetched at once when a tensor's read misses (see ``Tensor._read_ahead``).
AHEAD_FILES = 16
#: Smallest read-ahead window (``readahead_bytes``) with which a missed read also fetches next steps.
AHEAD_MIN_WINDOW = 64 * 1024
#: Value cache budget of a reader that does not read ahead (local trials; see the module docstring).
LOCAL_CACHE_BYTES = 2 * 1024 * 1024


class ValueReader:
    """Decode records at :class:`RecordLocation`s through a storage backend, with caching.

    Returned values are shared with the cache and read-only: callers copy before
    handing them out. On local storage the cache is capped at ``LOCAL_CACHE_BYTES``.
    ``shared_values``: a value cache that outlives this reader (``TieredValueCache``):
    values are looked up there after the reader's own cache, and kept there too.
    """

    def __init__(
        self,
        storage: Storage,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        readahead_bytes: int = 0,
        block_cache_bytes: int = DEFAULT_BLOCK_CACHE_BYTES,
        shared_values: ValueCache | None = None,
    ) -> None:
        self.storage = storage
        if isinstance(storage, LocalStorage):
            cache_bytes = min(cache_bytes, LOCAL_CACHE_BYTES)
        own = ValueCache(cache_bytes)
        self.cache: ValueCache | TieredValueCache = (
            own if shared_values is None else TieredValueCache(own, shared_values)
        )
        self.readahead_bytes = readahead_bytes
        self.blocks = BlockCache(block_cache_bytes)
        # event files a tensor's read-ahead fetches at once: half the block cache in read-ahead windows;
        # none with a window under AHEAD_MIN_WINDOW (a reader asked to read little beyond its records)
        self.ahead_files = 0
        if readahead_bytes >= AHEAD_MIN_WINDOW:
            self.ahead_files = max(1, min(AHEAD_FILES, block_cache_bytes // 2 // readahead_bytes))

    def holds(self, loc: RecordLocation) -> bool:
        """Whether ``loc`` is decoded or read from memory (the value cache or a read-ahead block)."""
        if loc in self.cache:
            return True
        path, start, length, _, _, _, _ = loc  # a RecordLocation's layout
        return self.blocks.find(path, start, start + length) is not None

    def fetch(self, loc: RecordLocation, neighbors: Neighbors | None = None) -> np.ndarray:
        """The value of one record (cached per location, shared: read-only).

        ``neighbors(loc)`` gives the other records of the same index, used to read
        ahead when ``readahead_bytes`` is set (see :mod:`tornasole.trials.readahead`).
        """
        cached = self.cache.get(loc)  # keyed by the location itself: no key object per read
        if cached is not None:
            return cached
        path, first, length, _, _, _, _ = loc  # a RecordLocation's layout
        end = first + length
        if not self.readahead_bytes:  # no read-ahead (local trials): exactly the record
            try:
                raw = self.storage.read(path, first, end)
            except Exception as exc:  # noqa: BLE001 - translated with file/step/tensor below
                raise read_error(loc, exc) from exc
            value = decode_location(loc, memoryview(raw))
            del raw  # the record's bytes go before the value is cached
            self.cache.put(loc, value)
            return value
        data = self.blocks.find(path, first, end)
        if data is None:
            start, stop = first, end
            if neighbors is not None:
                start, stop = readahead_span(path, first, end, neighbors(loc), self.readahead_bytes)
            try:
                raw = self.storage.read(path, start, stop)
            except Exception as exc:  # noqa: BLE001 - translated with file/step/tensor below
                raise read_error(loc, exc) from exc
            if (start, stop) != (first, end):
                self.blocks.put(path, start, raw)
            data = memoryview(raw)[first - start : end - start]
        value = decode_location(loc, data)
        self.cache.put(loc, value)
        return value

    def read_value(self, loc: RecordLocation, neighbors: Neighbors | None = None) -> np.ndarray:
        """:meth:`fetch`, as an array of the caller's own (writable; the cache keeps its copy)."""
        return self.fetch(loc, neighbors).copy()

    def read_values(
        self,
        locs: Sequence[RecordLocation],
        neighbors: Callable[[RecordLocation], Sequence[RecordLocation]] | None = None,
    ) -> list[np.ndarray | Exception]:
        """:meth:`fetch_many`, each value an array of the caller's own."""
        return [v if isinstance(v, Exception) else v.copy() for v in self.fetch_many(locs, neighbors)]

    def fetch_many(
        self,
        locs: Sequence[RecordLocation],
        neighbors: Callable[[RecordLocation], Sequence[RecordLocation]] | None = None,
    ) -> list[np.ndarray | Exception]:
        """Values of several records, read concurrently; an error is returned in its slot.

        Records of one event file that lie close together are read as one span
        (never more than that event file), then split: a step's tensors cost one
        request instead of one each. With read-ahead, spans are widened over
        ``neighbors(loc)`` and kept in the block cache.
        """
        out: list[np.ndarray | Exception | None] = [self.cache.get(loc) for loc in locs]
        todo = []
        for i, v in enumerate(out):
            if v is not None:
                continue
            loc = locs[i]
            view = None
            if self.readahead_bytes:
                path, start, length, _, _, _, _ = loc  # a RecordLocation's layout
                view = self.blocks.find(path, start, start + length)
            if view is None:
                todo.append(i)
            else:
                out[i] = self._decode(loc, view)
        spans = _spans(todo, locs)
        if self.readahead_bytes and neighbors is not None:
            for span in spans:
                first = locs[span.members[0]]
                budget = max(self.readahead_bytes, span.end - span.start)
                span.start, span.end = readahead_span(
                    first[LOC_PATH], span.start, span.end, neighbors(first), budget
                )
                span.widened = True
        for batch in _batches(spans, BATCH_BYTES if self.readahead_bytes else LOCAL_BATCH_BYTES):
            results = self.storage.read_many([span.request for span in batch], on_error="return")
            for span, data in zip(batch, results):
                if isinstance(data, BaseException):
                    for i in span.members:
                        out[i] = read_error(locs[i], data)
                    continue
                if span.widened:
                    self.blocks.put(span.path, span.start, data)
                view = memoryview(data)
                if len(span.members) == 1 and not span.widened:  # exactly one record: no slicing
                    i = span.members[0]
                    out[i] = self._decode(locs[i], view)
                    continue
                for i in span.members:
                    loc = locs[i]
                    offset = loc[LOC_START] - span.start
                    out[i] = self._decode(loc, view[offset : offset + loc[LOC_LENGTH]])
        return out  # type: ignore[return-value]

    def _decode(self, loc: RecordLocation, data: memoryview) -> np.ndarray | Exception:
        """Decode and cache one record; a format error is returned, not raised."""
        try:
            value = decode_location(loc, data)
        except (FormatError, IndexReaderException) as exc:
            return exc
        self.cache.put(loc, value)
        return value

    def prefetch(
        self,
        locs: Iterable[RecordLocation],
        neighbors: Callable[[RecordLocation], Sequence[RecordLocation]] | None = None,
    ) -> int:
        """Fetch and cache what is not cached yet; errors are left for the later ``fetch`` to raise."""
        todo = [loc for loc in dict.fromkeys(locs) if loc not in self.cache]
        return sum(1 for v in self.fetch_many(todo, neighbors) if not isinstance(v, Exception))


@dataclass
class _Span:
    """Bytes ``[start, end)`` of one event file covering the records ``members`` (indices)."""

    path: str
    start: int
    end: int
    members: list[int]
    widened: bool = False

    @property
    def request(self) -> ReadRequest:
        return ReadRequest(self.path, self.start, self.end)


def _spans(indices: list[int], locs: Sequence[RecordLocation]) -> list[_Span]:
    """Group records by event file and merge those at most ``SPAN_GAP`` bytes apart."""
    by_path: dict[str, list[int]] = {}
    for i in indices:
        by_path.setdefault(locs[i][LOC_PATH], []).append(i)
    spans: list[_Span] = []
    for path, members in by_path.items():
        if len(members) == 1:  # one record of this file (a tensor across steps): nothing to merge
            _, start, length, _, _, _, _ = locs[members[0]]  # a RecordLocation's layout
            spans.append(_Span(path, start, start + length, members))
            continue
        members.sort(key=lambda i: locs[i][LOC_START])
        cur: _Span | None = None
        for i in members:
            _, start, length, _, _, _, _ = locs[i]
            end = start + length
            near = cur is not None and start <= cur.end + SPAN_GAP
            if near and max(end, cur.end) - cur.start <= BATCH_BYTES:
                cur.end = max(cur.end, end)
                cur.members.append(i)
            else:
                cur = _Span(path, start, end, [i])
                spans.append(cur)
    return spans


def _batches(spans: list[_Span], limit: int) -> Iterable[list[_Span]]:
    """Consecutive groups of spans of at most ``limit`` bytes in total (one ``read_many`` each)."""
    batch: list[_Span] = []
    size = 0
    for span in spans:
        if batch and size + span.end - span.start > limit:
            yield batch
            batch, size = [], 0
        batch.append(span)
        size += span.end - span.start
    if batch:
        yield batch


def _where(loc: RecordLocation) -> str:
    _, start, length, _, _, _, index_path = loc  # a RecordLocation's layout
    return f"(index {index_path} says record [{start}, {start + length}))"


def read_error(loc: RecordLocation, exc: BaseException) -> IndexReaderException:
    if isinstance(exc, FileNotFoundError):
        msg = f"event file is missing {_where(loc)}"
    else:
        msg = f"cannot read event file: {type(exc).__name__}: {exc} {_where(loc)}"
    return IndexReaderException(
        msg, path=loc[LOC_PATH], offset=loc[LOC_START], step=loc[LOC_STEP], tensor_name=loc[LOC_TAG]
    )


def decode_location(loc: RecordLocation, data: bytes | memoryview) -> np.ndarray:
    """Decode the bytes of one ranged read; raise :class:`IndexReaderException` naming everything."""
    if len(data) < loc[LOC_LENGTH]:
        raise _decode_error(
            loc,
            f"index points past the end of the event file (or the file is truncated): "
            f"only {len(data)} of {loc[LOC_LENGTH]} bytes exist from offset {loc[LOC_START]}",
        )
    try:
        payload = tfrecord.read_record(data, loc[LOC_PATH], 0, loc[LOC_LENGTH])
        tag, value = event_records.decode_tensor(payload, path=loc[LOC_PATH])
    except FormatError as exc:
        raise _decode_error(loc, bare_message(exc), exc) from exc
    if tag != loc[LOC_TAG]:
        raise _decode_error(loc, f"record holds tensor {tag!r}, not {loc[LOC_TAG]!r}")
    return value


def _decode_error(loc: RecordLocation, msg: str, cause: BaseException | None = None) -> IndexReaderException:
    err = IndexReaderException(
        f"{msg} {_where(loc)}",
        path=loc[LOC_PATH],
        offset=loc[LOC_START],
        step=loc[LOC_STEP],
        tensor_name=loc[LOC_TAG],
    )
    err.__cause__ = cause
    return err


def bare_message(exc: FormatError) -> str:
    """``exc``'s message without the ``path, offset 0`` prefix (offsets inside a ranged read are relative)."""
    text = str(exc)
    if exc.path is not None and text.startswith(str(exc.path)):
        _, sep, rest = text.partition(": ")
        if sep:
            return rest
    return text

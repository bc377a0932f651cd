"""Reading values of a local trial: records decoded straight from mapped event files.

The short path from ``Tensor.value`` to the bytes: the index already gives the
record's file, offset and length; the event file is mapped once
(:meth:`LocalStorage.view <tornasole.storage.LocalStorage.view>`), the record
is a slice of that mapping. A record laid out as smdebug and we write it is
scanned in place (:mod:`tornasole.format.record_scan`): no protobuf message, and
the only copy of the value's bytes is the array handed out (anything else is
parsed with protobuf). No system call, no ``fstat`` and no cache
bookkeeping per value: a complete event file is immutable by the format's
contract, so it is re-checked only when a record fails to decode (the mapping
is dropped and the file now at the path gets one more try).

No value cache: decoding a record from the page cache costs a few microseconds,
about what a cache lookup and the copy it needs cost, and a streaming read over
a run only fills a cache with values never asked for again. Every value is an
array of its caller's own (writable, as smdebug returns).

Memory: reading one value touches that record's pages of the mapping and holds
the value (and, off the scanned path, the parsed record), never the whole event file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from tornasole.exceptions import IndexReaderException
from tornasole.format.event_records import decode_indexed_tensor
from tornasole.format.record_scan import scan_tensor_record
from tornasole.storage import LocalStorage
from tornasole.trials.reading import decode_location, read_error
from tornasole.trials.step_index import LOC_PATH, RecordLocation

__all__ = ["MappedValueReader"]

Neighbors = Callable[[RecordLocation], Sequence[RecordLocation]]

_frombuffer = np.frombuffer


class MappedValueReader:
    """Values of a local trial's records (same methods as :class:`~tornasole.trials.reading.ValueReader`).

    Examples
    --------
    >>> reader = MappedValueReader(LocalStorage())
    >>> reader.read_value(trial_location)  # doctest: +SKIP
    array([...], dtype=float32)
    """

    readahead_bytes = 0
    ahead_files = 0

    def __init__(self, storage: LocalStorage) -> None:
        self.storage = storage
        self._view = storage.view
        # the mmap objects themselves: the record scan's slices of them are bytes (memcmp, hashable)
        self._mapped = storage.mapped_files

    def read_value(self, loc: RecordLocation, neighbors: Neighbors | None = None) -> np.ndarray:
        """The value of the record at ``loc``, a writable array of the caller's own.

        Raises
        ------
        IndexReaderException
            The event file is missing or unreadable, or the record is cut short or
            corrupt; names the event file, the index file, the step and the tensor.
        """
        path, start, length, tag, _, _, _ = loc  # a RecordLocation's layout
        data = self._mapped.get(path)
        if data is not None:  # the common case, inline: a mapped file and a canonical record
            found = scan_tensor_record(data, start, length, tag)
            if found is not None:
                np_dtype, shape, offset, count = found
                value = _frombuffer(data, np_dtype, count, offset)
                if len(shape) != 1:
                    value = value.reshape(shape)
                return value.copy()  # the one copy of the value's bytes
        value = self.fetch(loc)
        if not value.flags.writeable:  # a view of the mapping or of the parsed record: copy it
            value = value.copy()
        return value

    def fetch(self, loc: RecordLocation, neighbors: Neighbors | None = None) -> np.ndarray:
        """The value of the record at ``loc``, possibly a read-only view of the mapped file.

        For values used internally (computed reductions, shapes); raises as :meth:`read_value`.
        """
        path, start, length, tag, _, _, _ = loc  # a RecordLocation's layout
        data = self._mapped.get(path)
        if data is not None:  # as in read_value: no copy at all, the value views the mapping
            found = scan_tensor_record(data, start, length, tag)
            if found is not None:
                np_dtype, shape, offset, count = found
                value = _frombuffer(data, np_dtype, count, offset)
                return value if len(shape) == 1 else value.reshape(shape)
        try:
            data = self._view(path)
        except Exception as exc:  # noqa: BLE001 - translated with file/step/tensor
            raise read_error(loc, exc) from exc
        value = decode_indexed_tensor(data, start, length, tag)
        if value is None:  # not the common well-formed record: decode the slow way, which says why
            try:
                value = decode_location(loc, data[start : start + length])
            except IndexReaderException:
                value = self._second_look(loc)
        return value

    def read_values(
        self, locs: Sequence[RecordLocation], neighbors: Neighbors | None = None
    ) -> list[np.ndarray | Exception]:
        """Values of several records in order; a failed read yields its exception in its slot.

        Each event file is mapped once for all its records (files are the same
        objects across calls), so a batch reads every file once. Each value is
        an array of its own: one allocation per value, whose memory the
        allocator reuses from one batch to the next (one block per batch was
        measured slower: a fresh block is faulted in afresh every time).
        """
        mapped, scan, read = self._mapped, scan_tensor_record, self.read_value
        out: list[np.ndarray | Exception] = []
        for loc in locs:
            path, start, length, tag, _, _, _ = loc  # a RecordLocation's layout
            data = mapped.get(path)
            if data is not None:  # read_value's common case, inline
                found = scan(data, start, length, tag)
                if found is not None:
                    value = _frombuffer(data, found[0], found[3], found[2])
                    out.append(value.copy() if len(found[1]) == 1 else value.reshape(found[1]).copy())
                    continue
            try:
                out.append(read(loc))
            except IndexReaderException as exc:
                out.append(exc)
        return out

    def fetch_many(
        self, locs: Sequence[RecordLocation], neighbors: Neighbors | None = None
    ) -> list[np.ndarray | Exception]:
        """Values of several records in order, possibly read-only views (for internal use)."""
        fetch = self.fetch
        out: list[np.ndarray | Exception] = []
        for loc in locs:
            try:
                out.append(fetch(loc))
            except IndexReaderException as exc:
                out.append(exc)
        return out

    def prefetch(self, locs: Iterable[RecordLocation], neighbors: Neighbors | None = None) -> int:
        """Map the event files of ``locs`` now; return how many records lie within their files.

        Nothing is decoded (there is no cache to fill); errors surface on the later read.
        """
        n = 0
        for loc in dict.fromkeys(locs):
            path, start, length, _, _, _, _ = loc  # a RecordLocation's layout
            try:
                data = self._view(path)
            except OSError:
                continue
            n += start + length <= len(data)
        return n

    def holds(self, loc: RecordLocation) -> bool:
        """Whether ``loc``'s event file is mapped already (a local read never makes a request)."""
        return loc[LOC_PATH] in self._mapped

    def _second_look(self, loc: RecordLocation) -> np.ndarray:
        """Decode ``loc`` from the file now at its path (it may have been replaced); else raise."""
        path, start, length, _, _, _, _ = loc  # a RecordLocation's layout
        self.storage.forget_view(path)
        try:
            data = self._view(path)
        except Exception as exc:  # noqa: BLE001 - translated with file/step/tensor
            raise read_error(loc, exc) from exc
        return decode_location(loc, data[start : start + length])

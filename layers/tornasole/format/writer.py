"""Write smdebug-format trials: the only module of the format layer that does I/O.

Ordering contract (what readers and the evaluator rely on):

1. the event file of a (step, worker) is published complete, in one atomic write;
2. then its index file, also atomic: an index object's arrival announces a
   complete (step, worker), so the S3 notification targets index keys;
3. the collections file of the worker, once (readers wait for ``num_workers`` of
   them to know how many workers complete a step);
4. the end-of-training marker, last; nothing is written after it.

A :class:`StepWriter` accumulates one step's records in memory (as smdebug's S3
path does), computing offsets as it goes, so both files can be written whole.
:class:`TrialWriter` publishes them through ``tornasole.storage`` in that order.
Byte output equals smdebug's ``FileWriter`` for the same records and wall times.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tornasole.format.collections import encode_collections
from tornasole.format.event_encoding import numeric_record, numeric_records
from tornasole.format.event_records import encode_record
from tornasole.format.index import (
    IndexEntry,
    ShapeEntry,
    StepIndex,
    index_entry,
    index_file_bytes,
    tensor_payload,
)
from tornasole.format.paths import (
    END_MARKER,
    collections_file_name,
    event_dir_name,
    event_file_name,
    index_file_name,
)
from tornasole.format.scalar_block import encode_block
from tornasole.modes import ModeKeys
from tornasole.storage.paths import join

if TYPE_CHECKING:
    from tornasole.storage.base import Storage

__all__ = ["StepWriter", "TrialWriter"]

_index_entry = index_entry

#: Event directories a :class:`TrialWriter` makes in one burst once steps come at a regular stride.
DIRS_AHEAD = 16


class StepWriter:
    """The records of one (global step, worker), built in memory.

    Parameters
    ----------
    step : int
        Global step (file names and ``Event.step``).
    worker : str
        Worker name (``worker_0``; TF device names are escaped in file names).
    mode : ModeKeys
        Default mode of the records added.
    mode_step : int, optional
        Default mode step of the records added; ``None`` means ``step``.

    Examples
    --------
    >>> import numpy as np
    >>> sw = StepWriter(5, "worker_0", mode=ModeKeys.TRAIN, mode_step=5)
    >>> sw.add_tensor("loss", np.float32(0.5), wall_time=1.0)
    IndexEntry(tensorname='loss', start_idx=0, length=90)
    >>> sw.event_file_name, sw.index_file_name
    ('events/000000000005/000000000005_worker_0.tfevents', 'index/000000000/000000000005_worker_0.json')
    """

    def __init__(
        self, step: int, worker: str, mode: ModeKeys = ModeKeys.GLOBAL, mode_step: int | None = None
    ) -> None:
        self.step = int(step)
        self.worker = worker
        self.mode = mode if mode is not None else ModeKeys.GLOBAL
        self._mode_value = self.mode.value
        self.mode_step = self.step if mode_step is None else int(mode_step)
        self._records: list[bytes] = []
        self._size = 0
        self._tensors: list[IndexEntry] = []
        self._shapes: list[ShapeEntry] = []
        self._tensor_meta: tuple[ModeKeys, int] | None = None
        self._shape_meta: tuple[ModeKeys, int] | None = None
        # (first entry, entries, their JSON) of each scalar block: its index entries are formatted once
        self._payloads: list[tuple[int, int, bytes]] = []
        self._event_file_name: str | None = None
        self._index_file_name: str | None = None

    @property
    def event_file_name(self) -> str:
        """Event file path relative to the trial directory."""
        if self._event_file_name is None:
            self._event_file_name = event_file_name(self.step, self.worker)
        return self._event_file_name

    @property
    def index_file_name(self) -> str:
        """Index file path relative to the trial directory."""
        if self._index_file_name is None:
            self._index_file_name = index_file_name(self.step, self.worker)
        return self._index_file_name

    @property
    def is_empty(self) -> bool:
        """Nothing added: no file should be written for this step."""
        return not self._tensors and not self._shapes

    @property
    def has_tensors(self) -> bool:
        """At least one record added (otherwise there is no event file, as with smdebug)."""
        return bool(self._tensors)

    def add_tensor(
        self,
        tag: str,
        value: Any,
        mode: ModeKeys | None = None,
        mode_step: int | None = None,
        wall_time: float | None = None,
    ) -> IndexEntry:
        """Append one tensor record; return its index entry.

        ``mode`` / ``mode_step`` default to the writer's; ``wall_time`` to now.
        Scalars become shape ``[1]`` and 0-d arrays stay 0-d (as smdebug).
        """
        if mode is None:
            mode, mode_value = self.mode, self._mode_value  # the enum's .value is a slow descriptor
        else:
            mode_value = mode.value
        mode_step = self.mode_step if mode_step is None else int(mode_step)
        if wall_time is None:
            wall_time = time.time()
        record = numeric_record(tag, value, self.step, mode_value, mode_step, wall_time) or encode_record(
            tag, value, step=self.step, mode=mode, mode_step=mode_step, wall_time=wall_time
        )
        size = len(record)
        entry = _index_entry(tag, self._size, size)
        self._records.append(record)
        self._size += size
        self._tensors.append(entry)
        if self._tensor_meta is None:
            self._tensor_meta = (mode, mode_step)
        return entry

    def add_tensors(self, items: Sequence[tuple[str, Any, float]]) -> None:
        """:meth:`add_tensor` for many ``(tag, value, wall_time)``, in order, with the writer's mode
        and mode step (a hook's step: tens of small values, encoded in one pass; a ``None`` wall
        time is the time of that record's encoding)."""
        if not items:
            return
        step, mode_value, mode_step = self.step, self._mode_value, self.mode_step
        records, tensors, offset = self._records, self._tensors, self._size
        for (tag, value, wall_time), record in zip(
            items, numeric_records(items, step, mode_value, mode_step)
        ):
            if record is None:
                record = encode_record(
                    tag, value, step=step, mode=self.mode, mode_step=mode_step, wall_time=wall_time
                )
            size = len(record)
            tensors.append(_index_entry(tag, offset, size))
            records.append(record)
            offset += size
        self._size = offset
        if tensors and self._tensor_meta is None:
            self._tensor_meta = (self.mode, mode_step)

    def add_scalar_block(self, tags: Sequence[str], values: Any, wall_time: float | None = None) -> None:
        """One 0-d float32 record per tag, in order, with the writer's mode and mode step: the same
        bytes as :meth:`add_tensors` of ``(tag, np.float32(value), wall_time)``, encoded from a layout
        of ``tags`` made once (:mod:`tornasole.format.scalar_block`: statistics mode's few hundred
        values a step)."""
        array = np.asarray(values)
        if len(tags) != array.size:
            raise ValueError(
                f"step {self.step}: add_scalar_block got {len(tags)} tags for {array.size} values"
            )
        if wall_time is None:
            wall_time = time.time()
        encoded = encode_block(
            tags,
            array.reshape(-1),
            step=self.step,
            mode_value=self._mode_value,
            mode_step=self.mode_step,
            wall_time=wall_time,
            offset=self._size,
        )
        if encoded is None:  # not float32, a negative step, a zero wall time: record by record
            self.add_tensors([(tag, array.reshape(-1)[i, ...], wall_time) for i, tag in enumerate(tags)])
            return
        data, block = encoded
        if not block.entries:
            return
        self._payloads.append((len(self._tensors), len(block.entries), block.payload_bytes))
        self._records.append(data)
        self._size += len(data)
        self._tensors.extend(block.entries)
        if self._tensor_meta is None:
            self._tensor_meta = (self.mode, self.mode_step)

    def add_shape(
        self,
        name: str,
        shape: Sequence[int],
        original_name: str | None = None,
        mode: ModeKeys | None = None,
        mode_step: int | None = None,
    ) -> ShapeEntry:
        """Record a tensor's shape in the index (``ReductionConfig(save_shape=True)``)."""
        entry = ShapeEntry(
            name, name if original_name is None else original_name, tuple(int(d) for d in shape)
        )
        self._shapes.append(entry)
        if self._shape_meta is None:
            self._shape_meta = (
                self.mode if mode is None else mode,
                self.mode_step if mode_step is None else int(mode_step),
            )
        return entry

    def event_bytes(self) -> bytes:
        """The event file: all records, in the order added."""
        return b"".join(self._records)

    def index(self) -> StepIndex:
        """The index of this step; ``meta`` comes from the first tensor (else the first shape)."""
        meta = self._tensor_meta or self._shape_meta
        if meta is None:
            raise ValueError(f"step {self.step} worker {self.worker}: nothing was added, there is no index")
        efn = self.event_file_name if self._tensors else None
        return StepIndex(meta[0], meta[1], efn, list(self._tensors), list(self._shapes))

    def index_bytes(self) -> bytes:
        """The index file, byte-identical to smdebug's for the same records."""
        meta = self._tensor_meta or self._shape_meta
        if meta is None:
            raise ValueError(f"step {self.step} worker {self.worker}: nothing was added, there is no index")
        tensors = self._tensors
        pieces, done = [], 0
        for first, count, payload in self._payloads:  # the scalar blocks' entries are JSON already
            if first > done:
                pieces.append(tensor_payload(tensors[done:first]).encode())
            pieces.append(payload)
            done = first + count
        if done < len(tensors):
            pieces.append(tensor_payload(tensors[done:]).encode())
        efn = self.event_file_name if tensors else None
        return index_file_bytes(meta[0], meta[1], efn, pieces, self._shapes)


class TrialWriter:
    """Publish steps, collections and the end marker of one worker, in contract order.

    Parameters
    ----------
    trial_dir : str
        Local path or ``s3://bucket/prefix``.
    worker : str
        This writer's worker name (used for the collections file and :meth:`step_writer`).
    storage : Storage, optional
        Defaults to ``tornasole.storage.get_storage(trial_dir)``.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> tw = TrialWriter(tempfile.mkdtemp())
    >>> sw = tw.step_writer(0)
    >>> _ = sw.add_tensor("x", np.arange(3, dtype=np.int32))
    >>> tw.write_step(sw)
    >>> tw.write_collections({}, num_workers=1)
    >>> tw.write_end_marker()
    """

    def __init__(self, trial_dir: str, worker: str = "worker_0", storage: Storage | None = None) -> None:
        if storage is None:
            from tornasole.storage.schemes import get_storage

            storage = get_storage(trial_dir)
        self.trial_dir = trial_dir
        self.worker = worker
        self.storage = storage
        self._collections_written = False
        self._ended = False
        # join(trial_dir, name) for the relative names of the format (no leading "/"): a concatenation
        self._prefix = join(trial_dir, "x")[:-1]
        self._last_step: int | None = None
        self._stride: int | None = None
        self._dirs_ahead: dict[int, str] = {}  # step -> its event directory, made ahead and not yet used

    def _path(self, relative: str) -> str:
        return self._prefix + relative

    def step_writer(
        self, step: int, mode: ModeKeys = ModeKeys.GLOBAL, mode_step: int | None = None
    ) -> StepWriter:
        """A new :class:`StepWriter` for this worker."""
        return StepWriter(step, self.worker, mode=mode, mode_step=mode_step)

    def write_step(self, step_writer: StepWriter) -> None:
        """Write the event file (if any record), then the index file; nothing for an empty step."""
        self._check_open("write a step")
        if step_writer.is_empty:
            return
        if step_writer.has_tensors:
            self._make_event_dirs_ahead(step_writer.step)
            self.storage.write_atomic(self._path(step_writer.event_file_name), step_writer.event_bytes())
        self.storage.write_atomic(self._path(step_writer.index_file_name), step_writer.index_bytes())

    def _make_event_dirs_ahead(self, step: int) -> None:
        """Each step's event file has a directory of its own (smdebug's layout): where steps come at a
        regular stride (every step, every N), the directories of the next :data:`DIRS_AHEAD` are made
        in one burst (a storage with ``make_dirs``: local files), most of them warm instead of cold.

        Directories made ahead for steps that did not come (the stride changed, training ended) are
        removed when they are passed and at :meth:`close`; only empty ones are.
        """
        make = getattr(self.storage, "make_dirs", None)
        if make is None or not hasattr(self.storage, "remove_empty_dirs"):
            return
        stride = None if self._last_step is None else step - self._last_step
        regular = stride is not None and stride > 0 and stride == self._stride
        self._last_step, self._stride = step, stride
        if self._dirs_ahead.pop(step, None) is not None or not regular:
            return  # made ahead already; or no stride yet to predict from (write_atomic makes it)
        self._remove_dirs_ahead(before=step)
        dirs = {step + i * stride: self._path(event_dir_name(step + i * stride)) for i in range(DIRS_AHEAD)}
        make(list(dirs.values()))
        del dirs[step]
        self._dirs_ahead.update(dirs)

    def _remove_dirs_ahead(self, before: int | None = None) -> None:
        stale = [s for s in self._dirs_ahead if before is None or s < before]
        if stale:
            self.storage.remove_empty_dirs([self._dirs_ahead.pop(s) for s in stale])

    def close(self) -> None:
        """Remove the event directories made ahead for steps that never came (empty ones only)."""
        if self._dirs_ahead:
            self._remove_dirs_ahead()

    def write_collections(self, collections: dict[str, dict[str, Any]], num_workers: int) -> None:
        """Write this worker's collections file (collection dicts by name); allowed once."""
        self._check_open("write collections")
        if self._collections_written:
            raise RuntimeError(
                f"collections of worker {self.worker!r} under {self.trial_dir} already written"
            )
        data = encode_collections(collections, num_workers)
        self.storage.write_atomic(self._path(collections_file_name(self.worker)), data)
        self._collections_written = True

    def write_end_marker(self) -> None:
        """Write the empty ``training_job_end.ts``; after it this writer refuses to write."""
        self.close()  # no empty step directory is left once training has ended
        self.storage.write_atomic(self._path(END_MARKER), b"")
        self._ended = True

    def _check_open(self, what: str) -> None:
        if self._ended:
            raise RuntimeError(f"cannot {what}: the end marker of {self.trial_dir} was already written")

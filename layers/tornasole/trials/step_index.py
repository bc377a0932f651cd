"""The in-memory index of a trial: steps, modes, workers and where each record lives.

Index files are the only thing a trial reads eagerly; event files are read one
record at a time, on demand. This module turns decoded index files into the
lookups the Trial / Tensor API needs (global step <-> mode step, tensor ->
steps, (tensor, step) -> per-worker record locations) and decides step
completeness, so that ``trial.py`` and ``tensor.py`` stay thin.

Completeness (FORMAT.md 6): a step is complete when ``num_workers`` distinct
workers have its index file, when a later step is complete (the missing worker
skipped it), or when training has ended and everything was read. An index file
that cannot be decoded is recorded as a *bad step* with its error, so reading
that (step, worker) raises the error while every other step stays readable.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import NamedTuple

from tornasole.modes import GLOBAL, ModeKeys

__all__ = [
    "StepState",
    "RecordLocation",
    "TensorEntry",
    "StepRecord",
    "StepTable",
    "flat_reductions",
    "entry_reductions",
    "reduction_location",
    "entry_locations",
    "LOC_PATH",
    "LOC_START",
    "LOC_LENGTH",
    "LOC_TAG",
    "LOC_STEP",
    "LOC_WORKER",
    "LOC_INDEX",
    "ENTRY_LOCATION",
    "ENTRY_SHAPE",
    "ENTRY_REDUCTIONS",
    "ENTRY_ERROR",
]

_NO_ENTRIES: Mapping[int, TensorEntry] = MappingProxyType({})


class StepState(Enum):
    """Answer of ``Trial.has_passed_step`` (values as in smdebug)."""

    UNAVAILABLE = 0
    AVAILABLE = 1
    NOT_YET_AVAILABLE = 2


class RecordLocation(NamedTuple):
    """One record of one event file: exactly the bytes a ranged read must fetch.

    ``tag`` is the record's tag (``smdebug/reductions/...`` for reductions);
    ``index_path`` is the index file that pointed here, for error messages.

    The field layout of a location. The index holds *plain tuples* in this
    layout (``LOC_*`` are the positions; code reads locations by position, so
    either kind works): CPython's garbage collector stops tracking a plain
    tuple of strings and ints at its first collection, where it keeps
    traversing every NamedTuple instance in every full collection. A trial
    holds one location per record, so with instances the index made each full
    collection cost tens of milliseconds at 100,000 records, and reading paid
    for it.
    """

    event_path: str
    start: int
    length: int
    tag: str
    step: int
    worker: str
    index_path: str


LOC_PATH, LOC_START, LOC_LENGTH, LOC_TAG, LOC_STEP, LOC_WORKER, LOC_INDEX = range(7)


class TensorEntry(NamedTuple):
    """What one worker saved of one tensor at one step: its value's record, shape, reductions, error.

    The field layout of an entry; the index holds plain tuples in it (``ENTRY_*``
    positions), for the reason given at :class:`RecordLocation`. ``reductions``
    is flat, ``(name, abs, location)`` repeated (read it with
    :func:`reduction_location` and :func:`entry_reductions`): a dict would keep
    the entry tracked for good, and each level of nested tuples costs one more
    collection before the collector lets go (it meets a tuple before its
    elements). ``error`` is set when the index entry of the value was
    malformed: reading the value raises it (the step itself stays, as in smdebug).
    """

    location: RecordLocation | None = None
    shape: tuple[int, ...] | None = None
    reductions: tuple[str | bool | RecordLocation, ...] = ()
    error: Exception | None = None


ENTRY_LOCATION, ENTRY_SHAPE, ENTRY_REDUCTIONS, ENTRY_ERROR = range(4)


def flat_reductions(saved: Mapping[tuple[str, bool], RecordLocation]) -> tuple[object, ...]:
    """``{(name, abs): location}`` as an entry's flat ``reductions`` field, in the mapping's order."""
    return tuple(x for (name, absolute), loc in saved.items() for x in (name, absolute, loc))


def entry_reductions(entry: TensorEntry) -> list[tuple[tuple[str, bool], RecordLocation]]:
    """``[((name, abs), location), ...]`` of the reductions saved in ``entry``, in saved order."""
    flat = entry[ENTRY_REDUCTIONS]
    return [((flat[i], flat[i + 1]), flat[i + 2]) for i in range(0, len(flat), 3)]  # type: ignore[misc]


def reduction_location(entry: TensorEntry, key: tuple[str, bool]) -> RecordLocation | None:
    """The saved record of reduction ``key`` (``(name, abs)``) in ``entry``, or ``None``."""
    flat = entry[ENTRY_REDUCTIONS]
    name, absolute = key
    for i in range(0, len(flat), 3):
        if flat[i] == name and flat[i + 1] == absolute:
            return flat[i + 2]  # type: ignore[return-value]
    return None


def entry_locations(entry: TensorEntry) -> list[RecordLocation]:
    """Every record of ``entry``: its value's (when saved), then its reductions'."""
    loc = entry[ENTRY_LOCATION]
    out = [] if loc is None else [loc]
    out.extend(entry[ENTRY_REDUCTIONS][2::3])  # type: ignore[arg-type]
    return out


@dataclass
class StepRecord:
    """One global step: its mode, mode step and, per worker, its tensors."""

    step: int
    mode: ModeKeys
    mode_step: int
    workers: dict[str, dict[str, TensorEntry]] = field(default_factory=dict)
    #: ``(worker, its tensors)`` of the step's only worker, ``None`` with several: the read path's lookup.
    single: tuple[str, dict[str, TensorEntry]] | None = field(default=None, repr=False, compare=False)


class StepTable:
    """Thread-safe registry of every loaded (step, worker) index.

    ``num_workers`` is ``None`` while unknown (no collections file read yet):
    then no step is complete until training has ended, unless
    ``assume_complete_when_unknown`` (trials built from explicit index files,
    which never list) treats any loaded step as complete.

    Examples
    --------
    >>> from tornasole.modes import TRAIN
    >>> t = StepTable(num_workers=1)
    >>> t.add_step(5, "worker_0", TRAIN, 0, {"loss": TensorEntry(shape=())})
    >>> t.steps(), t.steps(TRAIN), t.global_step(TRAIN, 0), t.is_complete(5)
    ([5], [0], 5, True)
    """

    def __init__(self, num_workers: int | None = None, assume_complete_when_unknown: bool = False) -> None:
        self.lock = threading.RLock()
        self.num_workers = num_workers
        self.assume_complete_when_unknown = assume_complete_when_unknown
        self.all_loaded = False
        self._steps: dict[int, StepRecord] = {}
        self._mode_to_global: dict[ModeKeys, dict[int, int]] = {}
        # name -> {global step: the entry of the first worker (by name) that saved anything of it}: the
        # tensor's steps, and the read path's lookup in a tensor's own dict (a loop over one tensor's
        # steps then stays in that dict, instead of visiting every step's record and tensor dict)
        self._tensor_steps: dict[str, dict[int, TensorEntry]] = {}
        self._mode_tensors: dict[ModeKeys, set[str]] = {}
        self._workers: set[str] = set()
        self._last_complete = -1
        # (name, mode, complete_only) -> the sorted steps tensor_steps/tensor_mode_steps answer, until the
        # table next changes (_changed). Why: rules that look back ask for a tensor's steps at every step
        # they evaluate, and sorting the whole history each time made a rule over a long run quadratic
        # (0.68 ms a call at 10,000 steps); between two loads the answer cannot move.
        # (None, mode, complete_only): every step's, :meth:`sorted_steps`
        self._sorted_steps: dict[tuple[str | None, ModeKeys | None, bool], tuple[int, ...]] = {}
        # (step, worker) -> the error raised while loading that index file
        self.bad: dict[tuple[int, str], Exception] = {}

    # -- loading -------------------------------------------------------------------------------
    def add_step(
        self, step: int, worker: str, mode: ModeKeys, mode_step: int, tensors: dict[str, TensorEntry]
    ) -> None:
        """Register one worker's index for ``step``; the first (mode, mode_step) seen for a step wins."""
        with self.lock:
            self._changed()
            rec = self._steps.get(step)
            if rec is None:
                rec = self._steps[step] = StepRecord(step, mode, mode_step)
                if mode != GLOBAL:
                    self._mode_to_global.setdefault(mode, {}).setdefault(mode_step, step)
            replaced = rec.workers.get(worker)
            rec.workers[worker] = tensors
            rec.single = (worker, tensors) if len(rec.workers) == 1 else None
            self._workers.add(worker)
            self.bad.pop((step, worker), None)
            tensor_steps = self._tensor_steps
            if rec.single is not None:  # the common case: the step's one worker
                if replaced is not None:
                    self._drop_names(step, replaced.keys() - tensors.keys())
                for name, entry in tensors.items():
                    steps = tensor_steps.get(name)
                    if steps is None:
                        tensor_steps[name] = {step: entry}
                    else:
                        steps[step] = entry
            else:
                self._reindex(rec, tensors.keys() | (replaced.keys() if replaced is not None else set()))
            if rec.mode != GLOBAL:
                self._mode_tensors.setdefault(rec.mode, set()).update(tensors)
            if self._has_all_workers(rec) and step > self._last_complete:
                self._last_complete = step

    def _changed(self) -> None:
        """The steps, their workers or their completeness moved: the sorted answers are stale."""
        if self._sorted_steps:
            self._sorted_steps.clear()

    def _reindex(self, rec: StepRecord, names: Iterable[str]) -> None:
        """Point each of ``names`` at the entry of the first worker (by name) of ``rec`` that has it."""
        for name in names:
            owners = [w for w, tensors in rec.workers.items() if name in tensors]
            if not owners:
                self._drop_names(rec.step, (name,))
                continue
            steps = self._tensor_steps.setdefault(name, {})
            steps[rec.step] = rec.workers[min(owners)][name]

    def _drop_names(self, step: int, names: Iterable[str]) -> None:
        """``step`` no longer holds ``names`` (a worker's index was re-read without them)."""
        for name in names:
            steps = self._tensor_steps.get(name)
            if steps is not None:
                steps.pop(step, None)
                if not steps:  # a Tensor holding this dict falls back to the step records
                    del self._tensor_steps[name]

    def add_bad(self, step: int, worker: str, error: Exception) -> None:
        """Record that ``worker``'s index for ``step`` could not be loaded."""
        with self.lock:
            self.bad[(step, worker)] = error
            self._workers.add(worker)

    def add_workers(self, workers: Iterable[str]) -> None:
        with self.lock:
            self._workers.update(workers)

    def set_num_workers(self, n: int | None) -> None:
        """Set the expected number of workers and recompute the last complete step."""
        with self.lock:
            self._changed()
            self.num_workers = n
            for step in sorted(self._steps, reverse=True):
                if self._has_all_workers(self._steps[step]):
                    self._last_complete = max(self._last_complete, step)
                    break

    def settle_through(self, step: int) -> None:
        """Treat every step up to ``step`` as complete (a worker is not coming back for them)."""
        with self.lock:
            self._changed()
            self._last_complete = max(self._last_complete, step)

    def mark_all_loaded(self) -> None:
        """Training ended and the final refresh is done: every loaded step is complete."""
        with self.lock:
            self._changed()
            self.all_loaded = True
            if self._steps:
                self._last_complete = max(self._last_complete, max(self._steps))

    # -- completeness ----------------------------------------------------------------------------
    def _has_all_workers(self, rec: StepRecord) -> bool:
        n = self.num_workers
        if n is None:
            return self.assume_complete_when_unknown and bool(rec.workers)
        return len(rec.workers) >= n

    @property
    def last_complete_step(self) -> int:
        """Highest complete global step, ``-1`` if none."""
        return self._last_complete

    def is_complete(self, step: int) -> bool:
        """Whether the global ``step`` (which must be loaded) is complete."""
        with self.lock:
            rec = self._steps.get(step)
            if rec is None:
                return False
            return self.all_loaded or step <= self._last_complete or self._has_all_workers(rec)

    # -- queries --------------------------------------------------------------------------------
    def steps(self, mode: ModeKeys | None = None, complete_only: bool = False) -> list[int]:
        """Global steps (``mode`` None or GLOBAL) or ``mode``'s mode steps, sorted."""
        return list(self.sorted_steps(mode, complete_only))

    def sorted_steps(self, mode: ModeKeys | None = None, complete_only: bool = False) -> tuple[int, ...]:
        """:meth:`steps` as the table keeps it until it next changes (no copy). Why: a rule run over a
        finished trial asks at every step it visits, saved or not; sorting the whole run each time made
        ``invoke_rule`` quadratic in the run's steps (30 s for 27 rules over 2,000 saved steps)."""
        mode = GLOBAL if mode is None else mode
        with self.lock:
            key = (None, mode, complete_only)
            found = self._sorted_steps.get(key)
            if found is None:
                if mode == GLOBAL:
                    found = tuple(sorted(s for s in self._steps if not complete_only or self.is_complete(s)))
                else:
                    m2g = self._mode_to_global.get(mode, {})
                    found = tuple(
                        sorted(ms for ms, g in m2g.items() if not complete_only or self.is_complete(g))
                    )
                self._sorted_steps[key] = found
            return found

    def has_step(self, step: int) -> bool:
        return step in self._steps

    def record(self, step: int) -> StepRecord | None:
        return self._steps.get(step)

    def modes(self) -> list[ModeKeys]:
        """Modes used by the trial, GLOBAL excluded (as smdebug), in enum order."""
        with self.lock:
            return sorted(self._mode_to_global, key=lambda m: m.value)

    def global_step(self, mode: ModeKeys, mode_step: int) -> int | None:
        if mode == GLOBAL:
            return mode_step
        return self._mode_to_global.get(mode, {}).get(mode_step)

    def mode_of(self, step: int) -> tuple[ModeKeys, int] | None:
        rec = self._steps.get(step)
        return None if rec is None else (rec.mode, rec.mode_step)

    def workers(self) -> list[str]:
        with self.lock:
            return sorted(self._workers)

    def tensor_names(self) -> set[str]:
        with self.lock:
            return set(self._tensor_steps)

    def has_tensor(self, name: str) -> bool:
        return name in self._tensor_steps

    def mode_tensor_names(self, mode: ModeKeys) -> set[str]:
        with self.lock:
            return set(self._mode_tensors.get(mode, ()))

    def step_tensor_names(self, step: int) -> set[str]:
        with self.lock:
            rec = self._steps.get(step)
            if rec is None:
                return set()
            return {name for tensors in rec.workers.values() for name in tensors}

    def tensor_step_count(self, name: str) -> int:
        """How many global steps :meth:`tensor_steps` would list (no sort, no lock: a length)."""
        return len(self._tensor_steps.get(name, ()))

    def tensor_entries(self, name: str) -> Mapping[int, TensorEntry]:
        """``{global step: entry}`` of ``name``, the entry of the step's first worker (by name): what
        :meth:`first_entry` finds, kept up to date as steps load (read-only; empty for an unknown
        name, and then never updated). No lock: a dict lookup is atomic under the GIL, and an entry
        is complete before it is added."""
        return self._tensor_steps.get(name, _NO_ENTRIES)

    def tensor_steps(self, name: str) -> list[int]:
        """Global steps at which any worker saved anything (value, reduction or shape) of ``name``."""
        with self.lock:
            key = (name, None, False)
            found = self._sorted_steps.get(key)
            if found is None:
                found = self._sorted_steps[key] = tuple(sorted(self._tensor_steps.get(name, ())))
            return list(found)

    def tensor_mode_steps(self, name: str, mode: ModeKeys, complete_only: bool = True) -> list[int]:
        """Steps of ``mode`` (global steps for GLOBAL) at which ``name`` was saved, sorted."""
        with self.lock:
            key = (name, mode, complete_only)
            found = self._sorted_steps.get(key)
            if found is None:
                found = self._sorted_steps[key] = tuple(self._mode_steps(name, mode, complete_only))
            return list(found)

    def _mode_steps(self, name: str, mode: ModeKeys, complete_only: bool) -> list[int]:
        # Protected by self.lock (the table's RLock), which its one caller, tensor_mode_steps, holds.
        steps = self._tensor_steps.get(name, ())
        if complete_only and not self.all_loaded:  # is_complete of each, without its lock
            last, recs, full = self._last_complete, self._steps, self._has_all_workers
            steps = [g for g in steps if g <= last or full(recs[g])]
        if mode == GLOBAL:
            return sorted(steps)
        recs = self._steps
        return sorted(recs[g].mode_step for g in steps if recs[g].mode == mode)

    def entries(self, name: str, step: int) -> dict[str, TensorEntry]:
        """Per-worker entries of ``name`` at global ``step`` (empty if none)."""
        with self.lock:
            rec = self._steps.get(step)
            if rec is None:
                return {}
            return {w: t[name] for w, t in rec.workers.items() if name in t}

    def first_entry(self, name: str, step: int) -> tuple[str, TensorEntry] | None:
        """``(worker, entry)`` of the first worker (by name) that saved ``name`` at global ``step``.

        What ``entries`` followed by ``min`` gives, without building the dict
        (this runs once per value read). No lock: a dict lookup and a tuple
        snapshot of a step's workers are each atomic under the GIL, and a
        worker's tensor dict is complete before it is added (``add_step``).
        """
        rec = self._steps.get(step)
        if rec is None:
            return None
        single = rec.single
        if single is not None:  # one worker: one lookup
            entry = single[1].get(name)
            return None if entry is None else (single[0], entry)
        found = None
        for w, tensors in tuple(rec.workers.items()):
            entry = tensors.get(name)
            if entry is not None and (found is None or w < found[0]):
                found = (w, entry)
        return found

    def first_location(self, name: str, step: int) -> RecordLocation | None:
        """Where :meth:`first_entry`'s value is, or ``None``.

        ``None`` also when that worker saved no value of ``name`` there (the caller
        then takes the path that says why). Read from :meth:`tensor_entries`, which
        holds the first worker's entry of every step.
        """
        entry = self._tensor_steps.get(name, _NO_ENTRIES).get(step)
        return None if entry is None else entry[ENTRY_LOCATION]

    def locations(self, step: int, worker: str) -> list[RecordLocation]:
        """Every record (values and reductions) of ``worker``'s index for ``step``."""
        with self.lock:
            rec = self._steps.get(step)
            tensors = rec.workers.get(worker, {}) if rec is not None else {}
            out = []
            for entry in tensors.values():
                out.extend(entry_locations(entry))
            return out

    def neighbors(self, loc: RecordLocation) -> list[RecordLocation]:
        """Every record of the index file that ``loc`` came from (what a read-ahead may bring along)."""
        return self.locations(loc[LOC_STEP], loc[LOC_WORKER])

    def bad_for_step(self, step: int) -> dict[str, Exception]:
        """Worker -> load error, for index files of ``step`` that could not be read."""
        with self.lock:
            return {w: e for (s, w), e in self.bad.items() if s == step}

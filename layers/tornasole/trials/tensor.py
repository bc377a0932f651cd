"""A saved tensor of a trial: its steps, values, reductions, shapes and workers.

A Tensor holds no data. It is handed its collaborators: the trial's step table
(where records are), its value reader (the bytes, decoded) and a refresh
callable (to pick up steps of a live trial); the trial itself only answers the
public step questions (``has_passed_step``) when a step is missing.

``worker=None`` means the tensor's only worker, or with several workers the
first one (sorted by name) that saved it at that step. A worker the trial has
never seen raises :class:`InvalidWorker`. The step argument may also be passed
as smdebug's keyword ``step_num``.

Values are handed out as writable arrays of their own (as smdebug's reader
returns fresh arrays): code that modifies a value in place changes neither a
cache nor later reads.

Missing data raises the documented exceptions: :class:`TensorUnavailableForStep`
(the step exists, this tensor, or this reduction, was not saved there),
:class:`StepUnavailable` (the step was never saved and training is past it),
:class:`StepNotYetAvailable` (it may still arrive), :class:`NoMoreData`
(training ended before it), or the recorded error of an unreadable index file.
"""

from __future__ import annotations

import functools
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from tornasole.exceptions import InvalidWorker, StepNotYetAvailable, TensorUnavailableForStep
from tornasole.format import reductions
from tornasole.modes import GLOBAL, ModeKeys
from tornasole.trials.step_index import (
    ENTRY_ERROR,
    ENTRY_LOCATION,
    ENTRY_REDUCTIONS,
    ENTRY_SHAPE,
    RecordLocation,
    StepState,
    TensorEntry,
    entry_reductions,
    reduction_location,
)

if TYPE_CHECKING:
    from tornasole.trials.step_index import StepTable

__all__ = ["OwnerTrial", "Tensor", "ValueSource"]


#: Reduction names already canonical (the usual spelling): one dict lookup instead of a validation.
_CANONICAL = {name: name for name in reductions.ALL_REDUCTIONS}


def _step_from_kwargs(method: str, step: int | None, kwargs: dict[str, Any]) -> int:
    """``step`` given as smdebug's ``step_num=`` keyword (and nothing else unexpected)."""
    step_num = kwargs.pop("step_num", None)
    if kwargs:
        raise TypeError(f"{method}() got unexpected keyword arguments {sorted(kwargs)}")
    if step is not None and step_num is not None:
        raise TypeError(f"{method}() got both 'step' and 'step_num'")
    if step is None and step_num is None:
        raise TypeError(f"{method}() missing required argument: 'step'")
    return step if step is not None else step_num


class ValueSource(Protocol):
    """What a Tensor needs of a value reader (local: mapped files; remote: ranged reads and a cache)."""

    readahead_bytes: int
    ahead_files: int

    def holds(self, loc: RecordLocation) -> bool:
        """Whether ``loc`` is read without a request (remote readers)."""
        ...

    def prefetch(self, locs: Sequence[RecordLocation], neighbors: Any = None) -> int:
        """Fetch ``locs`` now, concurrently; errors are left for later reads."""
        ...

    def fetch(self, loc: RecordLocation, neighbors: Any = None) -> np.ndarray:
        """The value, possibly shared with a cache (read-only): for internal use."""
        ...

    def read_value(self, loc: RecordLocation, neighbors: Any = None) -> np.ndarray:
        """The value as an array of the caller's own."""
        ...

    def read_values(self, locs: Sequence[RecordLocation], neighbors: Any = None) -> list[Any]:
        """Values in order, each the caller's own; a failed read yields its exception."""
        ...


class OwnerTrial(Protocol):
    """What a Tensor asks of its trial (a :class:`~tornasole.trials.trial.Trial`): whether a step it
    lacks is gone or still to come. A protocol, so this module never imports the trial that builds it."""

    name: str
    loaded_all_steps: bool

    def has_passed_step(self, step: int, mode: ModeKeys = GLOBAL) -> StepState:
        """Whether ``step`` of ``mode`` is saved, never will be, or may still arrive."""
        ...

    def step_unavailable_error(self, step: int, mode: ModeKeys) -> Exception:
        """The error for a step that is not (or not yet) a step of the trial."""
        ...


def _step_num_alias(method: Callable[..., Any]) -> Callable[..., Any]:
    """Accept smdebug's keyword ``step_num=`` for the ``step`` argument (``value(step_num=5)``)."""

    @functools.wraps(method)
    def wrapper(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        if "step_num" in kwargs:
            if args or "step" in kwargs:
                raise TypeError(f"{method.__name__}() got both 'step' and 'step_num'")
            kwargs["step"] = kwargs.pop("step_num")
        return method(self, *args, **kwargs)

    return wrapper


class Tensor:
    """One tensor name of a trial (obtain it with ``trial.tensor(name)``).

    Parameters
    ----------
    name : str
    trial : Trial
        The owner (``tensor.trial`` as in smdebug; asked about missing steps).
    table : StepTable
        Where each (step, worker) record of the trial is.
    reader : ValueSource
        Decodes records into arrays.
    refresh : callable
        Picks up new steps of a live trial (``trial.maybe_refresh``).

    Examples
    --------
    >>> t = trial.tensor("gradient/Net_fc1.weight")  # doctest: +SKIP
    >>> t.steps(), t.value(0).shape, t.reduction_value(0, "mean", abs=True)  # doctest: +SKIP
    """

    def __init__(
        self, name: str, trial: OwnerTrial, table: StepTable, reader: ValueSource, refresh: Callable[[], None]
    ) -> None:
        self.name = name
        self.trial = trial
        self._table = table
        self._reader = reader
        self._refresh = refresh
        # remote readers read ahead over the records of the same index file
        self._neighbors = table.neighbors if reader.readahead_bytes else None
        self._computed: dict[tuple[int, str, str, bool], np.ndarray] = {}
        # the read path's lookups, bound once: this tensor's own {step: first worker's entry}, kept up
        # to date by the table (a loop over this tensor's steps stays in one dict), then the step records
        self._by_step = table.tensor_entries(name)
        self._first_location = table.first_location
        self._first_entry = table.first_entry
        self._steps_sorted: list[int] | None = None  # the read-ahead's view of tensor_steps (remote)
        self._read_value = reader.read_value

    def __repr__(self) -> str:
        return f"<Tensor {self.name!r} of trial {self.trial.name!r}>"

    # -- steps ---------------------------------------------------------------------------------
    def steps(self, mode: ModeKeys = GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """Global steps (GLOBAL) or ``mode``'s mode steps at which this tensor was saved."""
        mode = GLOBAL if mode is None else mode
        self._refresh()
        return self._table.tensor_mode_steps(self.name, mode, complete_only=not show_incomplete_steps)

    def prev_steps(self, step: int, n: int | None = None, mode: ModeKeys = GLOBAL) -> list[int]:
        """The last ``n`` steps (all if None) up to and including ``step``."""
        steps = self.steps(mode)
        prev = steps[: bisect_right(steps, step)]
        return prev[-n:] if n else prev

    @_step_num_alias
    def workers(self, step: int, mode: ModeKeys = GLOBAL) -> list[str]:
        """Workers that saved this tensor at ``step``, sorted."""
        g, entries = self._entries(step, mode)
        return sorted(entries)

    # -- values --------------------------------------------------------------------------------
    def value(
        self, step: int | None = None, mode: ModeKeys = GLOBAL, worker: str | None = None, **kwargs: Any
    ) -> np.ndarray:
        """The saved value at ``step`` as a numpy array of its own (writable).

        ``step_num=`` (smdebug's keyword) is accepted for ``step``; spelled out
        here rather than through the alias decorator because this is the call a
        read loop makes once per value.
        """
        if kwargs or step is None:
            step = _step_from_kwargs("value", step, kwargs)
        if worker is None and (mode is GLOBAL or mode is None):  # the common call, in a few lookups
            entry = self._by_step.get(step)
            loc = entry[ENTRY_LOCATION] if entry is not None else self._first_location(self.name, step)
            if loc is not None:
                if self._neighbors is not None:
                    self._read_ahead(loc, step)
                return self._read_value(loc, self._neighbors)
        mode = GLOBAL if mode is None else mode
        g, _, entry = self._resolve(step, mode, worker)
        loc = entry[ENTRY_LOCATION]
        if loc is None:
            raise self._no_value(step, mode, worker)
        if self._neighbors is not None:
            self._read_ahead(loc, g)
        return self._reader.read_value(loc, self._neighbors)

    def values(self, mode: ModeKeys = GLOBAL, worker: str | None = None) -> dict[int, np.ndarray]:
        """``{step: value}`` for every complete step of ``mode``, read in one batch.

        Each event file is read once for all the values it holds (locally
        mapped; on S3 one ranged read per file, concurrently). Raises what
        :meth:`value` would raise for the first step that fails.
        """
        steps = self.steps(mode)
        name = self.name
        if worker is None and (mode is GLOBAL or mode is None):  # the common call
            by_step, first = self._by_step, self._first_location
            locs = []
            for s in steps:
                entry = by_step.get(s)
                locs.append(entry[ENTRY_LOCATION] if entry is not None else first(name, s))
        else:
            locs = [None] * len(steps)
        for i, loc in enumerate(locs):
            if loc is None:
                loc = locs[i] = self._entry(steps[i], mode, worker)[ENTRY_LOCATION]
                if loc is None:
                    raise self._no_value(steps[i], mode, worker)
        values = self._reader.read_values(locs, self._neighbors)
        for v in values:
            if isinstance(v, Exception):
                raise v
        return dict(zip(steps, values))

    @_step_num_alias
    def shape(self, step: int, mode: ModeKeys = GLOBAL, worker: str | None = None) -> tuple[int, ...]:
        """The saved shape (``shape_payload``) if there is one, else the value's shape."""
        entry = self._entry(step, mode, worker)
        if entry[ENTRY_SHAPE] is not None:
            return entry[ENTRY_SHAPE]
        if entry[ENTRY_LOCATION] is None:
            raise self._no_value(step, mode, worker)
        return tuple(self._reader.fetch(entry[ENTRY_LOCATION], self._neighbors).shape)

    @_step_num_alias
    def has_reductions(self, step: int, mode: ModeKeys = GLOBAL, worker: str | None = None) -> bool:
        """Whether reduction records were saved for this tensor at ``step``."""
        return bool(self._entry(step, mode, worker)[ENTRY_REDUCTIONS])

    def reduction_value(
        self,
        step: int | None = None,
        reduction_name: str | None = None,
        mode: ModeKeys = GLOBAL,
        worker: str | None = None,
        abs: bool = False,  # noqa: A002 - smdebug's keyword
        **kwargs: Any,
    ) -> np.ndarray:
        """A reduction: the saved record if there is one, else computed from the full value and cached.

        ``reduction_name`` is one of min max mean prod std sum variance l1 l2
        (``l1_norm``/``l2_norm`` accepted). ``step_num=`` is accepted for ``step``
        (spelled out, as in :meth:`value`: rules call this once per tensor and step).
        """
        if kwargs or step is None:
            step = _step_from_kwargs("reduction_value", step, kwargs)
        if reduction_name is None:
            raise TypeError("reduction_value() missing required argument: 'reduction_name'")
        red = _CANONICAL.get(reduction_name) or reductions.canonical_reduction(reduction_name)
        key = (red, bool(abs))
        found = None
        if worker is None and (mode is GLOBAL or mode is None):  # the common call: one lookup
            entry = self._by_step.get(step)
            if entry is not None:  # a saved reduction record, read as a value is
                loc = reduction_location(entry, key)
                if loc is not None:
                    if self._neighbors is not None:
                        self._read_ahead(loc, step)
                    return self._read_value(loc, self._neighbors)
            found = self._first_entry(self.name, step)
        if found is not None:
            g = step
            w, entry = found
        else:
            mode = GLOBAL if mode is None else mode
            g, w, entry = self._resolve(step, mode, worker)
        loc = reduction_location(entry, key)
        if loc is not None:
            if self._neighbors is not None:
                self._read_ahead(loc, g)
            return self._read_value(loc, self._neighbors)
        loc = entry[ENTRY_LOCATION]
        if loc is None:
            raise self._no_value(step, GLOBAL if mode is None else mode, worker)
        computed_key = (g, w, *key)
        cached = self._computed.get(computed_key)
        if cached is None:
            if self._neighbors is not None:
                self._read_ahead(loc, g)
            value = self._reader.fetch(loc, self._neighbors)
            cached = self._computed[computed_key] = reductions.compute(value, *key)
        return cached.copy()

    @_step_num_alias
    def reduction_values(
        self, step: int, mode: ModeKeys = GLOBAL, worker: str | None = None
    ) -> dict[tuple[str, bool], np.ndarray]:
        """``{(reduction, abs): value}`` of every reduction saved at ``step`` (one read of its event file)."""
        pairs = entry_reductions(self._entry(step, mode, worker))
        keys = [k for k, _ in pairs]
        values = self._reader.read_values([loc for _, loc in pairs], self._neighbors)
        for v in values:
            if isinstance(v, Exception):
                raise v
        return dict(zip(keys, values))

    def _read_ahead(self, loc: RecordLocation, step: int) -> None:
        """Remote trials: when ``loc`` is not in memory, fetch it with this tensor's next steps.

        A read missing ``loc`` costs a request; reads go on along the tensor's
        steps (a loop over steps) or along the tensors of the step (read ahead
        within the event file anyway). So the event files of the next
        :attr:`ValueReader.ahead_files` steps are fetched now, concurrently, each
        widened over its records: one round of requests instead of one per step.
        Errors are left for the read that follows to raise.
        """
        reader = self._reader
        if not reader.ahead_files or reader.holds(loc):
            return
        steps = self._steps_sorted
        if steps is None or len(steps) != self._table.tensor_step_count(self.name):  # steps only get added
            steps = self._steps_sorted = self._table.tensor_steps(self.name)
        first = self._first_location
        ahead = [loc]
        i = bisect_right(steps, step)
        for s in steps[i : i + reader.ahead_files]:
            nxt = first(self.name, s)
            if nxt is not None:
                ahead.append(nxt)
        reader.prefetch(ahead, self._neighbors)

    # -- lookup --------------------------------------------------------------------------------
    def _no_value(self, step: int, mode: ModeKeys, worker: str | None) -> Exception:
        """The error for a step where only reductions or a shape of this tensor were saved.

        Or the error of its malformed index entry, when there was one.
        """
        entry = self._entry(step, mode, worker)
        if entry[ENTRY_ERROR] is not None:
            return entry[ENTRY_ERROR]
        return TensorUnavailableForStep(self.name, step, mode, has_reductions=bool(entry[ENTRY_REDUCTIONS]))

    def _entry(self, step: int, mode: ModeKeys, worker: str | None) -> TensorEntry:
        return self._resolve(step, GLOBAL if mode is None else mode, worker)[2]

    def _entries(self, step: int, mode: ModeKeys) -> tuple[int, dict[str, TensorEntry]]:
        """(global step, worker -> entry) for ``step``, refreshing once; raises if nothing is there."""
        mode = GLOBAL if mode is None else mode
        table = self._table
        g = table.global_step(mode, step)
        entries = table.entries(self.name, g) if g is not None else {}
        if not entries:
            self._refresh()
            g = table.global_step(mode, step)
            entries = table.entries(self.name, g) if g is not None else {}
        if not entries:
            raise self._missing(step, mode, g)
        return g, entries

    def _resolve(self, step: int, mode: ModeKeys, worker: str | None) -> tuple[int, str, TensorEntry]:
        table = self._table
        if worker is None:  # the common call: the step is loaded and some worker saved the tensor
            g = table.global_step(mode, step)
            found = table.first_entry(self.name, g) if g is not None else None
            if found is not None:
                return g, found[0], found[1]
        if worker is not None and worker not in table.workers():
            self._refresh()
            if worker not in table.workers():
                raise InvalidWorker(worker, table.workers())
        g, entries = self._entries(step, mode)
        if worker is not None and worker not in entries and not table.is_complete(g):
            self._refresh()  # that worker's index may have landed since
            g, entries = self._entries(step, mode)
        if worker is None:
            worker = min(entries)
        elif worker not in entries:
            bad = table.bad.get((g, worker))
            if bad is not None:
                raise bad
            rec = table.record(g)
            if rec is not None and worker not in rec.workers and not table.is_complete(g):
                raise StepNotYetAvailable(step, mode)
            # smdebug's answer for a known worker without this tensor at this step (user code catches it).
            raise InvalidWorker(
                worker, message=f"worker {worker!r} saved no value of tensor {self.name!r} at step {step}"
            )
        return g, worker, entries[worker]

    def _missing(self, step: int, mode: ModeKeys, g: int | None) -> Exception:
        trial = self.trial
        if g is not None:
            bad = self._table.bad_for_step(g)
            if bad:
                return bad[min(bad)]
        state = trial.has_passed_step(step, mode)
        if state == StepState.AVAILABLE:
            return TensorUnavailableForStep(self.name, step, mode)
        if state == StepState.UNAVAILABLE:
            return trial.step_unavailable_error(step, mode)
        if trial.loaded_all_steps:
            return trial.step_unavailable_error(step, mode)
        return StepNotYetAvailable(step, mode)

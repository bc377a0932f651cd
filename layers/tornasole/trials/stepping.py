"""Step queries of a Trial: steps, modes, the global <-> mode step mapping, waiting for steps.

Kept apart from :mod:`tornasole.trials.trial` (loading and tensors) because
this is where smdebug's documented step semantics live:

* ``steps(mode)`` lists global steps (``mode`` None or GLOBAL) or that mode's
  mode steps, complete steps only unless ``show_incomplete_steps``;
* ``has_passed_step`` answers AVAILABLE (complete), NOT_YET_AVAILABLE (may still
  arrive) or UNAVAILABLE (never will: a later step is complete, or training
  ended without it);
* ``wait_for_steps`` polls (backing off from ``MIN_POLL_S`` to the trial's
  ``poll_interval``) until each step is available and raises
  :class:`StepUnavailable` for a skipped step, :class:`NoMoreData` for a step
  past the last one once training has ended.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from tornasole.exceptions import NoMoreData, StepNotYetAvailable, StepUnavailable
from tornasole.modes import GLOBAL, ModeKeys
from tornasole.trials.step_index import StepState

if TYPE_CHECKING:
    from tornasole.trials.step_index import StepTable

__all__ = ["StepQueries", "backoff", "MIN_POLL_S"]

#: First wait of a poll loop: data that is about to land is seen within milliseconds.
MIN_POLL_S = 0.005


def backoff(interval: float) -> Iterator[float]:
    """Waits between polls: ``MIN_POLL_S`` doubling up to ``interval`` seconds, then ``interval``.

    Examples
    --------
    >>> from itertools import islice
    >>> list(islice(backoff(0.04), 6))
    [0.005, 0.01, 0.02, 0.04, 0.04, 0.04]
    """
    delay = min(MIN_POLL_S, interval)
    while True:
        yield delay
        delay = min(delay * 2, interval)


class StepQueries:
    """Mixin over ``self._table`` (a StepTable) and ``self.maybe_refresh()``."""

    _table: StepTable
    loaded_all_steps: bool
    listing: bool
    dynamic_refresh: bool
    poll_interval: float

    def maybe_refresh(self, name: str | None = None) -> None:  # pragma: no cover - provided by Trial
        raise NotImplementedError

    def steps(self, mode: ModeKeys | None = None, show_incomplete_steps: bool = False) -> list[int]:
        """Global steps (``mode`` None / GLOBAL) or ``mode``'s mode steps, sorted; complete ones by default.

        Examples
        --------
        >>> trial.steps(), trial.steps(modes.EVAL)  # doctest: +SKIP
        ([0, 5, 10, ...], [0, 2, 4, 6, 8])
        """
        self.maybe_refresh()
        return self._table.steps(mode, complete_only=not show_incomplete_steps)

    def available_steps(self, mode: ModeKeys | None = None) -> list[int]:
        """Older name of :meth:`steps`."""
        return self.steps(mode)

    def modes(self) -> list[ModeKeys]:
        """Modes that have steps, GLOBAL excluded (as in smdebug)."""
        self.maybe_refresh()
        return self._table.modes()

    def mode_modestep(self, global_step: int) -> tuple[ModeKeys | None, int | None]:
        found = self._table.mode_of(global_step)
        if found is None:
            self.maybe_refresh()
            found = self._table.mode_of(global_step)
        return found if found is not None else (None, None)

    def mode(self, global_step: int) -> ModeKeys | None:
        """Mode of a saved global step (None if unknown)."""
        return self.mode_modestep(global_step)[0]

    def mode_step(self, global_step: int) -> int | None:
        """Mode step of a saved global step (None if unknown)."""
        return self.mode_modestep(global_step)[1]

    def global_step(self, mode: ModeKeys, mode_step: int) -> int | None:
        """Global step of ``mode``'s ``mode_step`` (for GLOBAL, ``mode_step`` itself; None if unknown)."""
        g = self._table.global_step(mode, mode_step)
        if g is None:
            self.maybe_refresh()
            g = self._table.global_step(mode, mode_step)
        return g

    def workers(self) -> list[str]:
        """Workers seen in collections and index file names, sorted."""
        self.maybe_refresh()
        return self._table.workers()

    def has_passed_step(self, step: int, mode: ModeKeys = GLOBAL) -> StepState:
        """Whether ``step`` (of ``mode``) is complete, may still arrive, or never will."""
        mode = GLOBAL if mode is None else mode
        self.maybe_refresh()
        table = self._table
        all_steps = table.sorted_steps(mode, complete_only=False)
        i = bisect_left(all_steps, step)
        if i < len(all_steps):
            g = table.global_step(mode, all_steps[i])
            if all_steps[i] == step:
                return StepState.AVAILABLE if table.is_complete(g) else StepState.NOT_YET_AVAILABLE
            if mode == GLOBAL and table.bad_for_step(step):
                # only unreadable index files: "available", so reading raises their error
                settled = self.loaded_all_steps or step <= table.last_complete_step
                return StepState.AVAILABLE if settled else StepState.NOT_YET_AVAILABLE
            return StepState.UNAVAILABLE if table.last_complete_step >= g else StepState.NOT_YET_AVAILABLE
        if mode == GLOBAL and table.bad_for_step(step) and self.loaded_all_steps:
            return StepState.AVAILABLE
        return StepState.UNAVAILABLE if self.loaded_all_steps else StepState.NOT_YET_AVAILABLE

    def step_unavailable_error(self, step: int, mode: ModeKeys) -> Exception:
        """The exception for an UNAVAILABLE step: NoMoreData past the end, else StepUnavailable."""
        if self.loaded_all_steps:
            known = self._table.sorted_steps(mode, complete_only=True)
            last = known[-1] if known else -1
            if step > last:
                m = getattr(mode, "name", mode)
                return NoMoreData(f"Looking for step {step} of mode {m}: training ended, last step is {last}")
        return StepUnavailable(step, mode)

    def wait_for_steps(
        self, required_steps: Iterable[int], mode: ModeKeys = GLOBAL, timeout: float | None = None
    ) -> None:
        """Block until every step is available (polls back off up to ``poll_interval`` s apart).

        Raises
        ------
        StepUnavailable
            A step was skipped: a later step is complete, or training ended before it.
        NoMoreData
            Training ended and the step is past the last saved one.
        StepNotYetAvailable
            ``timeout`` seconds passed, or the trial cannot list (``listing=False``)
            and the step is not loaded.

        Examples
        --------
        >>> trial.wait_for_steps([0, 10], mode=modes.TRAIN)  # doctest: +SKIP
        """
        mode = GLOBAL if mode is None else mode
        deadline = None if timeout is None else time.monotonic() + timeout
        previous = self.dynamic_refresh
        self.dynamic_refresh = True
        delays = backoff(self.poll_interval)
        try:
            for step in required_steps:
                while True:
                    state = self.has_passed_step(step, mode)
                    if state == StepState.AVAILABLE:
                        break
                    if state == StepState.UNAVAILABLE:
                        raise self.step_unavailable_error(step, mode)
                    if not self.listing or (deadline is not None and time.monotonic() >= deadline):
                        raise StepNotYetAvailable(step, mode)
                    wait = next(delays)
                    if deadline is not None:
                        wait = min(wait, max(0.0, deadline - time.monotonic()))
                    time.sleep(wait)
        finally:
            self.dynamic_refresh = previous

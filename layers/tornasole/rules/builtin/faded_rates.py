"""Whether a schedule, not a fault, took a run's updates to ~0: every saved learning rate faded.

Shared by the rules that fire on weights that stopped moving (UnchangedTensor, WeightUpdateRatio): where the
trial saves a learning rate (``lr/<group>``, :func:`tornasole.rules.builtin.series.learning_rate_names`;
both hooks save it), a window over which every saved rate stayed at or below ``faded_lr_fraction`` of its
peak so far is not judged. Why 1e-3 (the recommended set's value): an update is ``lr x g`` (SGD) or
``lr x m / sqrt(v)`` (Adam, whose normalised step is at most about 1 per element), and a healthy peak rate is
chosen so that a step moves a weight by well under its own size, about 1e-3 to 1e-2 of it (Adam's default
1e-3 on weights of order 1). A thousandth of that is 1e-6 to 1e-5 of the weight per step: at or below
``numpy.allclose``'s ``rtol`` of 1e-5, and near float32's resolution (1.2e-7), so neither rule can tell such
updates from none. A cosine decay to 0 spends the last 2 % of its steps there
(``(1 + cos(pi (1 - x))) / 2 <= 1e-3`` for ``x <= 0.02``).

A rate that did not decay there but was set to 0 is judged as before: the first saved value after its last
one above the fraction is 0 or below (a scheduler bug, a lambda that returns 0). A smooth schedule reaches
exactly 0 only at its end, from below the fraction when saved at least every 2 % of a cosine run. A window
in which any saved rate was still above the fraction (parameters left out of the optimiser under a live
rate) is judged as before, and a trial that saves no rate is judged exactly as without the parameter. The
serverless evaluator loads the run's first :data:`PEAK_LEADING_STEPS` saved steps and the recent window, so
there the peak is the largest rate among those: a warmup longer than that can hide the peak, which only
makes a window look less faded (judged).
"""

from __future__ import annotations

import bisect

import numpy as np

from tornasole.rules.builtin.series import learning_rate_names
from tornasole.rules.params import Param

__all__ = ["FADED_LR_FRACTION", "PEAK_LEADING_STEPS", "FadedRates"]

#: Saved steps from the run's start that the serverless evaluator loads for ``faded_lr_fraction``'s peak.
PEAK_LEADING_STEPS = 32

FADED_LR_FRACTION = Param(
    "faded_lr_fraction",
    "float",
    "0",
    "where the trial saves a learning rate: do not judge a window over which every saved rate stayed "
    "at or below this fraction of its peak so far (a schedule decayed to ~0); 0 turns this off",
)


class FadedRates:
    """Mixin for a :class:`BuiltinRule` with the parameter :data:`FADED_LR_FRACTION`."""

    def check_faded_lr_fraction(self) -> None:
        self.require_at_least(0, "faded_lr_fraction")
        if self.faded_lr_fraction >= 1:
            raise self.param_error("faded_lr_fraction", f"value {self.faded_lr_fraction} must be < 1")

    def faded_leading_steps(self) -> int:
        """The run's first saved steps the rule needs besides its window: the rates' peak (a warmup)."""
        return PEAK_LEADING_STEPS if self.faded_lr_fraction > 0 else 0

    def rates_faded(self, first: int, last: int) -> bool:
        """With ``faded_lr_fraction``: the trial saves at least one learning rate, and every one of them
        faded between global steps ``first`` and ``last`` (:meth:`_rate_faded`). False when the option is
        off or no rate is saved."""
        if not self.faded_lr_fraction > 0:
            return False
        key = (first, last)
        memo: dict[tuple[int, int], bool] = self.__dict__.setdefault("_faded_memo", {})
        if key not in memo:
            names = learning_rate_names(self)
            memo[key] = bool(names) and all(self._rate_faded(n, first, last) for n in names)
        return memo[key]

    def rate_zeroed(self, first: int, last: int) -> bool:
        """Whether a saved learning rate is 0 or below at a saved step between global steps ``first`` and
        ``last``: the optimiser makes no update there, whatever the weights still do (a momentum optimiser's
        velocity decaying after a scheduler bug set the rate to 0). False when no rate is saved."""
        for name in learning_rate_names(self):
            saved = self.base_trial.tensor(name).prev_steps(last)
            for s in saved[bisect.bisect_left(saved, first) :]:
                r = self.scalar(name, s)
                if r is not None and np.isfinite(r) and r <= 0:
                    return True
        return False

    def _rate_faded(self, name: str, first: int, last: int) -> bool:
        """Each saved value of rate ``name`` from the newest at or before ``first`` through ``last`` is at or
        below ``faded_lr_fraction`` x its peak so far (its largest value up to ``last``, > 0), and the rate
        decayed there: the first saved value after its last one above that level is not 0 or below (a rate
        set to 0 while still live is a scheduler bug, which is judged). False when a value is missing or not
        finite."""
        tensor = self.base_trial.tensor(name)
        start = tensor.prev_steps(first, 1)
        if not start:
            return False
        saved = tensor.prev_steps(last)
        peak, after_live = self._rate_history(name, saved)
        window = [self.scalar(name, s) for s in saved if s >= start[0]]
        if peak is None or peak <= 0 or any(r is None or not np.isfinite(r) for r in window):
            return False
        if after_live is not None and after_live <= 0:
            return False
        return max(window) <= self.faded_lr_fraction * peak

    def _rate_history(self, name: str, saved: list[int]) -> tuple[float | None, float | None]:
        """``(peak, after_live)`` of rate ``name`` over its saved steps ``saved``: the largest finite value,
        and the first value after the last one above ``faded_lr_fraction`` x the peak so far (None: none
        after it). Each step is read once: the state is kept between calls, whose lists only ever extend."""
        memo: dict[str, tuple[int, float | None, float | None, bool]] = self.__dict__.setdefault(
            "_rate_memo", {}
        )
        count, peak, after_live, live_seen = memo.get(name, (0, None, None, False))
        if count > len(saved):
            count, peak, after_live, live_seen = 0, None, None, False
        for s in saved[count:]:
            r = self.scalar(name, s)
            if r is None or not np.isfinite(r):
                continue
            if peak is None or r > peak:
                peak = r
            if r > self.faded_lr_fraction * peak:
                live_seen, after_live = True, None
            elif live_seen and after_live is None:
                after_live = r
                live_seen = False
        memo[name] = (len(saved), peak, after_live, live_seen)
        return peak, after_live

"""StalledLoss: the validation loss stopped moving while the training loss never came down.

Starting point: DeepLocalize's "loss that stops changing" and DeepDiagnosis's
"unchanged" check (the last values constant), read where they mean something:

* Validation passes, not training batches. A validation pass over a fixed
  validation set is a deterministic function of the weights: while the model
  learns (or is still finding its way, as a slow start does) its mean moves
  from pass to pass, up or down; when the weights barely move (a learning rate
  far too small, a scheduler that set it to 0, dead or saturated units) it
  stays put to a fraction of a percent. A training batch loss is noisy either
  way and cannot tell these apart.
* Like with like. Each pass's point is the mean of its first ``k`` saved
  EVAL steps, ``k`` the length of the shortest compared pass: the same
  validation batches in every pass. The newest pass is judged once, at the
  step where it becomes as long as the shortest earlier one (a whole pass,
  when the passes are alike; :func:`whole_passes`). Judged at each of its
  steps on its first batches, a pass's first batch alone could fire: a few
  dozen samples whose loss a net on a plateau keeps to 0.1% while the whole
  pass moves (the benchmark's numbers: ``docs/RULES.md``).
* Fires at an EVAL step when the last ``num_passes`` passes' means lie within
  ``tolerance_percent`` % of their mean (max - min), *and* the training loss
  never came down from the start: no mean of ``window`` consecutive saved TRAIN
  steps so far is ``diff_percent`` % below the mean of the first ``window``
  (TRAIN with TRAIN; the same "since the start" as LossNotDecreasing's
  ``reference=first``). Why the second condition: a converged run's validation
  loss is flat too, but its training loss came down.
* Optionally (``max_weight_change_percent``), the weights barely moved too: one
  norm over every tensor of the ``weights`` collection, taken at the last saved
  TRAIN step before the first compared pass and before the last one, changed by
  at most that % of the first. Why: a net sitting on a saddle (a sigmoid net at
  ln 2 for a few epochs) has a flat validation loss and a training loss that
  has not come down yet, exactly as a stall, but its optimiser is moving the
  weights (tens of % an epoch) and it learns a few epochs later; a stall (a
  learning rate far too small or zeroed, dead units) moves them by about 1% an
  epoch or less. Where no weights were saved across those passes (or they are
  not finite) the rule judges the losses alone and its report says so.
* A non-finite loss is not judged here (ExplodingTensor's job). Loss tensors:
  ``tensor_regex`` if given, else the ``losses`` collection; each judged alone
  and needing both modes.
"""

from __future__ import annotations

import math

import numpy as np

from tornasole.modes import EVAL, TRAIN
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.losses import loss_names
from tornasole.rules.builtin.overfit import trial_phases, whole_passes
from tornasole.rules.params import Param

__all__ = ["StalledLoss", "spread_percent", "whole_passes"]


def spread_percent(means: list[float]) -> float:
    """(max - min) of ``means`` as a percentage of the magnitude of their mean (inf when that is 0).

    Examples
    --------
    >>> spread_percent([1.0, 1.002, 0.998])
    0.4
    """
    centre = abs(float(np.mean(means)))
    if centre == 0:
        return 0.0 if max(means) == min(means) else math.inf
    return round(100.0 * (max(means) - min(means)) / centre, 12)


class StalledLoss(BuiltinRule):
    """Fires when validation passes stop moving (``tolerance_percent``) and the training loss never came down.

    The last ``num_passes`` passes' mean losses agree within ``tolerance_percent`` %, and no training-loss
    mean came ``diff_percent`` % below its start.

    Examples
    --------
    >>> # invoke_rule(StalledLoss(trial, num_passes="3", tolerance_percent="0.5"))
    """

    LIKELY_CAUSE = (
        "the validation loss and the weights stopped moving: the learning rate reached 0 or is too low, "
        "or the parameters are not in the optimiser"
    )
    SUGGESTED_FIX = "check the learning-rate schedule and that the optimiser holds every parameter"

    PARAMETERS = (
        Param("tensor_regex", "regex", None, "loss tensors (re.match); unset: the losses collection"),
        Param("num_passes", "int", "3", "validation passes compared"),
        Param("tolerance_percent", "float", "0.5", "their means lie within this % of their mean"),
        Param("diff_percent", "float", "5", "the training loss never came this % below its start"),
        Param("window", "int", "5", "saved TRAIN steps averaged into each training-loss mean"),
        Param(
            "max_weight_change_percent",
            "float",
            None,
            "also require the weights (one norm over the weights collection) to have changed by at most "
            "this % across the compared passes (unset: not checked)",
        ),
    )
    COLLECTIONS = (("losses", {"save_interval": "500"}),)

    def check_params(self) -> None:
        self.require_at_least(2, "num_passes")
        self.require_at_least(1, "window")
        self.require_at_least(0, "tolerance_percent")
        if not 0 <= self.diff_percent <= 100:
            raise self.param_error("diff_percent", f"value {self.diff_percent} must be within [0, 100]")
        self.require_at_least(0, "max_weight_change_percent")

    def history_steps(self) -> int | None:
        return None  # whole validation passes and the training loss since the start

    def leading_steps(self) -> int:
        return 4 * self.window  # the first window of TRAIN steps; EVAL steps may be interleaved

    def _mean(self, name: str, steps: list[int]) -> float | None:
        values = [self.scalar(name, s) for s in steps]
        if not values or any(v is None or not math.isfinite(v) for v in values):
            return None
        return float(np.mean(values))

    def _came_down(self, name: str, train: list[int]) -> tuple[float, float] | None:
        """``(start, below)`` when the training loss never came ``diff_percent`` % below its start, else
        None (also None when there are too few TRAIN steps to tell)."""
        if len(train) < 2 * self.window:
            return None
        cache = self.__dict__.setdefault("_window_means", {})
        first = self._mean(name, train[: self.window])
        if first is None:
            return None
        below = first - abs(first) * self.diff_percent / 100.0
        for i in range(2 * self.window, len(train) + 1):
            key = (name, train[i - 1])
            mean = cache.get(key)
            if mean is None:
                mean = self._mean(name, train[i - self.window : i])
                if mean is not None:
                    cache[key] = mean  # a saved step's losses never change; unreadable ones are asked again
            if mean is not None and mean <= below:
                return None
        return first, below

    def _weight_change(self, passes: list[list[int]]) -> tuple[float, int, int] | None:
        """``(change %, from step, to step)``: how far the weights moved between the last saved TRAIN step
        before the first compared pass and the last one before the newest pass (one norm over every tensor
        of the ``weights`` collection); None when that cannot be read (no weights saved at two such steps,
        or values that are not finite)."""
        trial = self.base_trial
        try:
            names = sorted(trial.tensor_names(collection="weights"))
        except (KeyError, ValueError):
            return None
        if not names:
            return None
        saved = self.same_mode_steps(names[0], passes[-1][0], mode=TRAIN)
        before_first = [s for s in saved if s < passes[0][0]]
        before_last = [s for s in saved if s < passes[-1][0]]
        if not before_first or before_last[-1] == before_first[-1]:
            return None
        a, b = before_first[-1], before_last[-1]
        diff2 = base2 = 0.0
        for name in names:
            wa, wb = self.value(name, a), self.value(name, b)
            if wa is None or wb is None or wa.shape != wb.shape:
                continue
            wa, wb = wa.astype(np.float64), wb.astype(np.float64)
            diff2 += float(np.sum((wb - wa) ** 2))
            base2 += float(np.sum(wa**2))
        if not (math.isfinite(diff2) and math.isfinite(base2)) or base2 == 0:
            return None
        return 100.0 * math.sqrt(diff2 / base2), a, b

    def invoke_at_step(self, step: int) -> bool:
        trial = self.base_trial
        if trial.mode(step) != EVAL:
            return False
        for name in loss_names(self, self.tensor_regex is None):
            gsteps = [s for s in trial.tensor(name).steps() if s <= step]
            if not gsteps or gsteps[-1] != step:
                continue
            runs = trial_phases(trial, gsteps)
            passes = whole_passes([st for mode, st in runs if mode == EVAL][-self.num_passes :])
            if passes is None or len(passes) < self.num_passes:
                continue
            k = len(passes[-1])
            means = [self._mean(name, p) for p in passes]
            if any(m is None for m in means):
                continue
            spread = spread_percent(means)
            if spread > self.tolerance_percent:
                continue
            train = [s for mode, st in runs if mode == TRAIN for s in st]
            start = self._came_down(name, train)
            if start is None:
                continue
            first, below = start
            weights_note = ""
            if self.max_weight_change_percent is not None:
                moved = self._weight_change(passes)
                if moved is None:
                    weights_note = "; the weights' change was not checked (none saved across the passes)"
                elif moved[0] > self.max_weight_change_percent:
                    continue  # the optimiser is moving the weights: a saddle or a slow start, not a stall
                else:
                    weights_note = (
                        f"; the weights changed by {self.fmt(moved[0])}% from step {moved[1]} to {moved[2]} "
                        f"<= max_weight_change_percent {self.fmt(self.max_weight_change_percent)}%"
                    )
            shown = ", ".join(f"{self.fmt(m)} (steps {p[0]}..{p[k - 1]})" for m, p in zip(means, passes))
            self.report_issue(
                f"{name} (EVAL): the means of the last {self.num_passes} validation passes ({shown}; "
                f"{k} saved step(s) each) lie within {self.fmt(spread)}% <= tolerance_percent "
                f"{self.fmt(self.tolerance_percent)}%, and no mean of {self.window} saved TRAIN steps up to "
                f"step {train[-1]} came {self.fmt(self.diff_percent)}% below the first ({self.fmt(first)}, "
                f"threshold {self.fmt(below)}){weights_note}",
                tensor=name,
                value=spread,
                threshold=self.tolerance_percent,
                train_start=first,
            )
            return True
        return False

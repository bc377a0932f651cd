"""OscillatingLoss: the loss swings up and down instead of settling (learning rate too high, batch too small).

Starting point: AUTOTRAINER's criterion (ICSE'21), which counts *swings* of the
accuracy from epoch to epoch (a local maximum at least 0.03 above a local
minimum) and reports an oscillation when they number at least 0.2 x epochs.
Here it is applied to a loss, which every trial saves, on *points* that average
away batch noise:

* Points: the loss tensor's saved steps of the rule's mode, grouped into
  phases (maximal runs of that mode between steps of another mode, e.g. one
  validation pass, or one epoch of training between validation passes); the
  point is the phase's mean loss. A trial saved in one mode only (no phases)
  is cut into groups of ``group_steps`` saved steps. The phase of the evaluated
  step counts with its mean so far.
* Mode: ``mode`` if given, else EVAL when the loss has EVAL steps (one point per
  validation pass), else TRAIN, else GLOBAL. The rule is evaluated at that
  mode's steps only.
* Swing: a point higher than both neighbours by at least ``swing_percent`` % of
  the range of the points so far (max - min) on *each* side: a rise and a fall.
  Relative to the range, not to the value, so that a healthy run's late bumps
  on a loss near 0 (0.0004 -> 0.0009) are small next to its initial descent,
  while a loss that bounces around one level swings by most of its range. The
  rise must also be at least ``min_swing_percent`` % of the point's own value,
  so that a flat loss's jitter (0.808 -> 0.815 -> 0.811) is not a swing.
* Fires when there are at least ``min_points`` points and the swings number at
  least ``min_swings`` and at least ``swing_fraction`` x the number of points.
"""

from __future__ import annotations

import math

import numpy as np

from tornasole.modes import GLOBAL, ModeKeys
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.losses import loss_names, pick_mode
from tornasole.rules.builtin.overfit import trial_phases
from tornasole.rules.params import Param

__all__ = ["OscillatingLoss", "count_swings"]


def count_swings(points: list[float], swing_percent: float, min_swing_percent: float = 0.0) -> list[int]:
    """Indices of the points that rise over both neighbours by ``swing_percent`` % of the points' range.

    Examples
    --------
    >>> count_swings([1.0, 2.0, 1.0, 2.0, 1.0], 10)
    [1, 3]
    >>> count_swings([1.0, 0.8, 0.82, 0.6], 10)
    []
    """
    if len(points) < 3:
        return []
    span = max(points) - min(points)
    out = []
    for i in range(1, len(points) - 1):
        p = points[i]
        rise = min(p - points[i - 1], p - points[i + 1])
        if rise > 0 and rise >= span * swing_percent / 100.0 and rise >= abs(p) * min_swing_percent / 100.0:
            out.append(i)
    return out


class OscillatingLoss(BuiltinRule):
    """Fires when the phase-mean loss swings up and down in at least ``swing_fraction`` of its points.

    Examples
    --------
    >>> # invoke_rule(OscillatingLoss(trial, swing_percent="10", swing_fraction="0.2"))
    """

    LIKELY_CAUSE = "the loss swings up and down: learning rate too high or batches too small"
    SUGGESTED_FIX = "lower the learning rate 10x, use larger batches or add learning-rate decay"

    PARAMETERS = (
        Param("tensor_regex", "regex", None, "loss tensors (re.match); unset: the losses collection"),
        Param("mode", "mode", None, "TRAIN, EVAL or GLOBAL (unset: EVAL, then TRAIN, then GLOBAL)"),
        Param(
            "swing_percent", "float", "10", "a swing rises over both neighbours by this % of the loss range"
        ),
        Param("min_swing_percent", "float", "5", "a swing also rises by this % of the point's own value"),
        Param("swing_fraction", "float", "0.2", "swings / points at or above this fires (AUTOTRAINER: 0.2)"),
        Param("min_swings", "int", "2", "fewest swings that fire"),
        Param("min_points", "int", "5", "fewest points (phase means) before judging"),
        Param("group_steps", "int", "10", "saved steps per point when the trial has no phases"),
    )
    COLLECTIONS = (("losses", {"save_interval": "500"}),)

    def check_params(self) -> None:
        self.require_at_least(1, "min_swings", "min_points", "group_steps")
        if self.min_points < 3:
            raise self.param_error(
                "min_points", f"value {self.min_points} must be >= 3 (a swing has neighbours)"
            )

    def history_steps(self) -> int | None:
        return None  # every phase of the run so far

    def _points(self, name: str, step: int, mode: ModeKeys) -> list[tuple[list[int], float]]:
        """``(global steps, mean loss)`` per phase (or group) up to ``step``."""
        trial = self.base_trial
        steps = [s for s in trial.tensor(name).steps() if s <= step]
        if mode == GLOBAL:
            groups = [steps] if steps else []
        else:
            groups = [st for m, st in trial_phases(trial, steps) if m == mode]
        if len(groups) == 1:  # no phases: fixed-size groups
            only = groups[0]
            groups = [only[i : i + self.group_steps] for i in range(0, len(only), self.group_steps)]
        out = []
        for g in groups:
            values = [self.scalar(name, s) for s in g]
            values = [v for v in values if v is not None and math.isfinite(v)]
            if values:
                out.append((g, float(np.mean(values))))
        return out

    def invoke_at_step(self, step: int) -> bool:
        for name in loss_names(self, self.tensor_regex is None):
            tensor = self.base_trial.tensor(name)
            mode = pick_mode(tensor, self.mode)
            if (
                mode is None
                or step not in tensor.steps()
                or (mode != GLOBAL and self.step_mode(step) != mode)
            ):
                continue
            points = self._points(name, step, mode)
            if len(points) < self.min_points:
                continue
            means = [p for _, p in points]
            swings = count_swings(means, self.swing_percent, self.min_swing_percent)
            needed = max(self.min_swings, math.ceil(self.swing_fraction * len(points)))
            if len(swings) >= needed:
                shown = ", ".join(
                    f"{self.fmt(means[i - 1])} -> {self.fmt(means[i])} -> {self.fmt(means[i + 1])} "
                    f"(steps {points[i][0][0]}..{points[i][0][-1]})"
                    for i in swings[-3:]
                )
                self.report_issue(
                    f"{name} ({mode.name}): {len(swings)} swings of >= {self.fmt(self.swing_percent)}% of "
                    f"the range {self.fmt(max(means) - min(means))} in {len(points)} phase means "
                    f"(>= {needed} = max(min_swings, swing_fraction {self.fmt(self.swing_fraction)} "
                    f"x points)); last: {shown}",
                    tensor=name,
                    value=len(swings),
                    points=len(points),
                    threshold=needed,
                )
                return True
        return False

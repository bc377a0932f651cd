"""OscillatingAccuracy: the training accuracy swings up and down from epoch to epoch.

AUTOTRAINER's unstable-training criterion (ICSE'21), on the quantity it reads:
the training accuracy of each epoch, as a Keras history holds it. The local
maxima and the local minima of that curve are taken in order and paired (the
first maximum with the first minimum, and so on); the run oscillates when at
least ``swing_fraction`` x epochs of those pairs differ by ``min_swing`` or
more. A loss cannot stand in for it (OscillatingLoss reads the loss, relative
to its range): an accuracy that flips between two levels may move the loss by
a fraction of a percent.

* Points: one per epoch. An epoch is a training phase: a run of TRAIN steps
  between validation passes (saved or not: the global step then advances more
  than the TRAIN step, :func:`trial_phases`). Its point is the accuracy at the
  phase's last saved step up to the step judged. An accuracy saved once per
  epoch, at its end (a loop's ``epoch_accuracy`` scalar; the Keras hook, as
  smdebug's, saves the epoch's logs there), gives the epoch's value. With
  ``per_step=True`` every saved step is an epoch (a run without validation
  passes that saves its epoch accuracy once per epoch, where phases cannot
  tell the epochs apart).
* Judged at the tensor's saved TRAIN steps, when the number of points is at
  least ``min_points`` and a multiple of ``check_every``: AUTOTRAINER checks
  every third epoch. Fed a running accuracy saved every few batches (Keras's
  batch logs; ``tensor_regex="accuracy"``), only epochs that have ended are
  points (their last value: the epoch's own, which the Keras hook saves at
  each epoch's end), judged at the first saved step of the next epoch: the
  epoch in progress, a mean over its first batches, is never one.
* The default ``tensor_regex`` names an epoch accuracy only: a batch's own
  accuracy (a few dozen samples) swings by more than 0.03 from batch to batch
  on a healthy run.
* ``min_swing`` is an absolute accuracy. AUTOTRAINER's 0.03 is 1,800 samples
  of a 60,000-sample training set; on a training set of a few hundred samples
  it is a handful of predictions, close to the epoch-to-epoch noise of a
  healthy net, and a larger ``min_swing`` suits it.
"""

from __future__ import annotations

import math

from tornasole.exceptions import TensorUnavailable
from tornasole.modes import TRAIN
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.overfit import trial_phases
from tornasole.rules.builtin.validation_passes import names_in_mode
from tornasole.rules.params import Param

__all__ = ["OscillatingAccuracy", "epoch_values", "paired_swings"]


def epoch_values(
    rule: BuiltinRule, name: str, step: int, per_step: bool = False, whole_epochs: bool = False
) -> list[tuple[int, float]] | None:
    """``(step, value)`` of TRAIN tensor ``name`` per epoch up to ``step``: each training phase's last saved
    value (every saved step with ``per_step``); None when one is missing or not finite.

    ``whole_epochs``: a running accuracy (saved more than once in some epoch) gives only the epochs that
    have ended, and only at the first saved step after one ended (None at its other steps): the epoch in
    progress is a mean over its first batches, noisier than any whole epoch.
    """
    trial = rule.base_trial
    steps = rule.same_mode_steps(name, step, TRAIN)
    groups = [[s] for s in steps] if per_step else [g for _, g in trial_phases(trial, steps)]
    if whole_epochs and not per_step and any(len(g) > 1 for g in groups):
        if len(groups) < 2 or groups[-1] != [step]:
            return None
        groups = groups[:-1]
    out = []
    for g in groups:
        v = rule.scalar(name, g[-1])
        if v is None or not math.isfinite(v):
            return None
        out.append((g[-1], v))
    return out


def paired_swings(points: list[float], min_swing: float) -> list[tuple[int, int]]:
    """``(maximum index, minimum index)`` of the paired local extrema of ``points`` that differ by at least
    ``min_swing``. Endpoints are neither; a point equal to a neighbour is both (a flat stretch).

    Examples
    --------
    >>> paired_swings([0.5, 0.6, 0.5, 0.6, 0.5], 0.03)
    [(1, 2)]
    >>> paired_swings([0.5, 0.6, 0.7, 0.8, 0.9], 0.03)
    []
    """
    inner = range(1, len(points) - 1)
    maxima = [i for i in inner if points[i] >= points[i - 1] and points[i] >= points[i + 1]]
    minima = [i for i in inner if points[i] <= points[i - 1] and points[i] <= points[i + 1]]
    return [(hi, lo) for hi, lo in zip(maxima, minima) if points[hi] - points[lo] >= min_swing]


class OscillatingAccuracy(BuiltinRule):
    """Fires when the per-epoch training accuracy swings by ``min_swing`` in ``swing_fraction`` x epochs.

    Examples
    --------
    >>> # invoke_rule(OscillatingAccuracy(trial, min_swing="0.03", swing_fraction="0.2"))
    """

    LIKELY_CAUSE = "the training accuracy swings up and down: learning rate too high or batches too small"
    SUGGESTED_FIX = "lower the learning rate 10x, use larger batches or add learning-rate decay"

    PARAMETERS = (
        Param(
            "tensor_regex",
            "regex",
            ".*epoch_acc(uracy)?$",
            "training accuracy saved once per epoch (re.match)",
        ),
        Param(
            "min_swing", "float", "0.03", "a paired maximum and minimum differ by this (AUTOTRAINER: 0.03)"
        ),
        Param("swing_fraction", "float", "0.2", "swings / epochs at or above this fires (AUTOTRAINER: 0.2)"),
        Param("min_points", "int", "3", "fewest epochs before judging"),
        Param("check_every", "int", "3", "judge when the epoch count is a multiple of this (AUTOTRAINER: 3)"),
        Param("per_step", "bool", "False", "every saved step is an epoch (no validation passes)"),
    )
    COLLECTIONS = (("metrics", {"save_interval": "500"}),)

    def check_params(self) -> None:
        self.require_at_least(1, "min_points", "check_every")
        if self.min_swing <= 0:
            raise self.param_error("min_swing", f"value {self.min_swing} must be > 0")
        if self.swing_fraction <= 0:
            raise self.param_error("swing_fraction", f"value {self.swing_fraction} must be > 0")

    def history_steps(self) -> int | None:
        return None  # every epoch since the start

    def invoke_at_step(self, step: int) -> bool:
        names = names_in_mode(self, self.tensor_regex, TRAIN)
        if not names:
            raise TensorUnavailable(
                f"matching tensor_regex {self.tensor_regex.pattern!r} in TRAIN mode (an epoch's training "
                "accuracy; save one per epoch for OscillatingAccuracy to judge this run)"
            )
        for name in names:
            if self.step_mode(step) != TRAIN or step not in self.base_trial.tensor(name).steps():
                continue
            points = epoch_values(self, name, step, self.per_step, whole_epochs=True)
            if points is None or len(points) < self.min_points or len(points) % self.check_every:
                continue
            values = [v for _, v in points]
            swings = paired_swings(values, self.min_swing)
            needed = self.swing_fraction * len(values)
            if swings and len(swings) >= needed:
                shown = ", ".join(
                    f"{self.fmt(values[hi])} (step {points[hi][0]}) / {self.fmt(values[lo])} "
                    f"(step {points[lo][0]})"
                    for hi, lo in swings[-3:]
                )
                self.report_issue(
                    f"{name} (TRAIN): {len(swings)} paired local maxima and minima of the per-epoch "
                    f"accuracy differ by >= min_swing {self.fmt(self.min_swing)} in {len(values)} epochs "
                    f"(>= swing_fraction {self.fmt(self.swing_fraction)} x {len(values)} = "
                    f"{self.fmt(needed)}); last: {shown}",
                    tensor=name,
                    value=len(swings),
                    points=len(values),
                    threshold=needed,
                )
                return True
        return False

"""SlowConvergence: the validation accuracy has not risen since training began, and it is low.

Starting point: AUTOTRAINER's slow-convergence criterion (ICSE'21): the best
epoch-to-epoch gain of the accuracy is below 0.01 and the best accuracy is
below 0.6, judged from 30% of training on. A loss cannot see this: a model
that predicts one class whatever its input has a flat accuracy while its loss
drifts down by a few percent as it calibrates that one guess, which is also
what a healthy slow start looks like in its loss. The accuracy tells them
apart.

* Points: validation passes. The accuracy tensors' saved EVAL steps are
  grouped into passes (phases, as the loss rules group them); each pass's
  point is the mean of its first ``k`` saved steps, ``k`` the length of the
  shortest pass, so every pass is judged on the same validation batches. The
  newest pass is judged once, at the step where it becomes as long as the
  shortest earlier pass (a whole pass, when the passes are alike;
  ``stalled_loss.whole_passes``): one batch's accuracy is that of a few dozen
  samples, and a model that predicts one class for them all looks flat there
  while the whole pass moves.
* Fires at an EVAL step once there are ``min_passes`` passes (a rule cannot
  know where 30% of a run is; three passes is where AUTOTRAINER first looks
  in a ten-epoch run) when the largest rise from one pass to the next is below
  ``min_gain`` and the best pass is below ``max_accuracy``. Over all passes
  since the start, as AUTOTRAINER does: both conditions only get harder to
  meet as passes are added, so a run that once learned is never flagged.
* Optionally (``loss_tolerance_percent``), the validation loss barely moved
  either: the pass means of each loss of the ``losses`` collection (same
  passes, same ``k``) lie within that % of their mean. Why: a net whose
  accuracy sits still for a few passes while its validation loss moves by
  several percent (a deep narrow ReLU stack finding its boundary; a sigmoid
  net swinging on a saddle) learns a pass or two later; a stalled run's loss
  (a learning rate far too small, a warm-up that never ends, dead units)
  moves by about 2% or less. A non-finite loss never passes this check
  (ExplodingTensor's job). Where no loss was saved in EVAL mode the rule
  judges the accuracy alone and its report says so.
* Accuracy tensors: ``tensor_regex`` (re.match), by default any name ending
  in ``acc`` or ``accuracy`` (Keras's ``accuracy`` metric; a loop's own
  ``accuracy`` scalar), read at their EVAL steps.
* Optionally (``train_tensor_regex``), the training accuracy was flat too, as
  AUTOTRAINER requires: the epoch values of the matching TRAIN tensors (one
  per epoch, as OscillatingAccuracy reads them: an accuracy saved once per
  epoch at its end) never rose by ``min_gain`` from one epoch to the next, up
  to the step judged. Why: a slow starter's validation accuracy can sit still
  for three passes while its training accuracy already climbs by a few
  hundredths an epoch; it then learns a pass or two later. A batch's accuracy
  saved every few batches cannot say this (its sampling noise alone exceeds
  0.01), hence the epoch value. Where no such tensor was saved the rule
  judges without it and its report says so.
* A trial with no accuracy saved in EVAL mode cannot be judged: every step
  is skipped (``TensorUnavailable``), so the rule never reports
  NoIssuesFound for a run it could not see (the evaluator reports it as
  NothingEvaluated).
"""

from __future__ import annotations

from tornasole.modes import TRAIN
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.oscillating_accuracy import epoch_values
from tornasole.rules.builtin.stalled_loss import spread_percent
from tornasole.rules.builtin.validation_passes import ValidationPasses, names_in_mode
from tornasole.rules.params import Param

__all__ = ["SlowConvergence", "max_rise"]


def max_rise(points: list[float]) -> float:
    """The largest rise from one point to the next (0 when it never rose).

    Examples
    --------
    >>> max_rise([0.5, 0.52, 0.51, 0.515])
    0.02
    >>> max_rise([0.6, 0.5])
    0.0
    """
    return round(max([0.0, *(b - a for a, b in zip(points, points[1:]))]), 12)


class SlowConvergence(ValidationPasses, BuiltinRule):
    """Fires when ``min_passes`` validation passes rose under ``min_gain`` and stay under ``max_accuracy``.

    Examples
    --------
    >>> # invoke_rule(SlowConvergence(trial, min_gain="0.01", max_accuracy="0.6"))
    """

    LIKELY_CAUSE = (
        "the accuracy is barely improving: learning rate too low, a model too small, or labels that do "
        "not match the inputs"
    )
    SUGGESTED_FIX = (
        "try the learning rate 10x higher, check the labels against the inputs, or widen the model"
    )

    PARAMETERS = (
        Param("tensor_regex", "regex", ".*acc(uracy)?$", "accuracy tensors (re.match)"),
        Param("min_passes", "int", "3", "validation passes before judging"),
        Param("min_gain", "float", "0.01", "no pass-to-pass rise of the accuracy reached this"),
        Param("max_accuracy", "float", "0.6", "the best pass's accuracy is below this"),
        Param(
            "train_tensor_regex",
            "regex",
            None,
            "also require the per-epoch training accuracy (TRAIN tensors matching this, once per epoch) "
            "never to have risen by min_gain (unset: not checked)",
        ),
        Param(
            "loss_tolerance_percent",
            "float",
            None,
            "also require the validation loss's pass means to lie within this % of their mean "
            "(unset: not checked)",
        ),
    )
    COLLECTIONS = (("metrics", {"save_interval": "500"}), ("losses", {"save_interval": "500"}))

    def check_params(self) -> None:
        self.require_at_least(2, "min_passes")
        self.require_at_least(0, "min_gain", "loss_tolerance_percent")

    def history_steps(self) -> int | None:
        return None  # every validation pass since the start

    def _loss_check(self, step: int, passes: list[list[int]]) -> tuple[bool, str]:
        """``(holds, note)`` for the validation-loss condition over the accuracy's ``passes``."""
        if self.loss_tolerance_percent is None:
            return True, ""
        trial = self.base_trial
        shown = []
        try:  # the losses collection only: this rule's tensor_regex names its accuracies
            losses = sorted(trial.tensor_names(collection="losses"))
        except (KeyError, ValueError):
            losses = []
        for name in losses:
            steps = set(trial.tensor(name).steps())
            if not all(s in steps for p in passes for s in p):
                continue  # this loss was not saved at the accuracy's steps
            means = self._means(name, passes)
            if means is None:
                return False, ""  # a non-finite validation loss is ExplodingTensor's to report
            spread = spread_percent(means)
            if spread > self.loss_tolerance_percent:
                return False, ""
            shown.append(f"{name} within {self.fmt(spread)}%")
        if not shown:
            return True, "; no validation loss saved at those steps: judged on the accuracy alone"
        return True, (
            f"; the validation loss barely moved ({', '.join(shown)} <= loss_tolerance_percent "
            f"{self.fmt(self.loss_tolerance_percent)}%)"
        )

    def _train_check(self, step: int) -> tuple[bool, str]:
        """``(holds, note)`` for the training-accuracy condition up to ``step``."""
        if self.train_tensor_regex is None:
            return True, ""
        shown = []
        for name in names_in_mode(self, self.train_tensor_regex, TRAIN):
            points = epoch_values(self, name, step)
            if not points:
                continue
            rise = max_rise([v for _, v in points])
            if rise >= self.min_gain:
                return False, ""
            shown.append(f"{name} rose by at most {self.fmt(rise)} in {len(points)} epochs")
        if not shown:
            return True, "; no per-epoch training accuracy saved: judged without it"
        return True, f"; the training accuracy was flat too ({', '.join(shown)})"

    def invoke_at_step(self, step: int) -> bool:
        why = "save one, e.g. in the metrics collection, for SlowConvergence to judge this run"
        for name, means, passes in self._validation_passes(step, why):
            if len(means) < self.min_passes:
                continue
            rise, best = max_rise(means), max(means)
            if rise >= self.min_gain or best >= self.max_accuracy:
                continue
            holds, loss_note = self._loss_check(step, passes)
            if not holds:
                continue
            holds, train_note = self._train_check(step)
            if not holds:
                continue
            shown = ", ".join(self.fmt(m) for m in means[-6:])
            self.report_issue(
                f"{name} (EVAL): in {len(means)} validation passes (means of {len(passes[-1])} saved "
                f"step(s) each, last: {shown}) the largest rise from one pass to the next is "
                f"{self.fmt(rise)} < min_gain {self.fmt(self.min_gain)} and the best is {self.fmt(best)} "
                f"< max_accuracy {self.fmt(self.max_accuracy)}: the model is not learning"
                f"{loss_note}{train_note}",
                tensor=name,
                value=rise,
                threshold=self.min_gain,
                best=best,
            )
            return True
        return False

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
* AUTOTRAINER's monitor (``utils/monitor.py``, ``loss_issue`` and ``judge_issue``)
  computes the count from 30% of the planned epochs and reports it at the
  first check past half of them (or while the accuracy converges slowly);
  it does not ask the model not to converge. A streaming rule does not know
  the planned epochs: it judges from ``min_points`` on.
* The default ``tensor_regex`` names an epoch accuracy only: a batch's own
  accuracy (a few dozen samples) swings by more than 0.03 from batch to batch
  on a healthy run.
* ``min_swing`` is an absolute accuracy. AUTOTRAINER's 0.03 is 1,800 samples
  of a 60,000-sample training set; on a training set of a few hundred samples
  it is a handful of predictions, close to the epoch-to-epoch noise of a
  healthy net, and a larger ``min_swing`` suits it.
* ``noise_z`` (0, off: AUTOTRAINER's criterion alone) asks each swing to be
  larger than the sampling noise of an accuracy over the ``n`` samples it
  counts: the two-proportion z statistic of the pair (pooled proportion
  ``p``, standard error ``sqrt(2 p (1 - p) / n)``) at least ``noise_z``. An
  epoch accuracy is a count over ``n`` predictions, each right with its own
  probability: its variance is at most ``p (1 - p) / n`` (a Poisson-binomial
  sum varies less than a binomial one of the same mean), and only the whole
  model moving together (an oscillation) exceeds it. ``n`` is read from the
  values themselves: the smallest ``q <= 4096`` of which every value judged
  is a multiple of ``1 / q`` (a saved float32 ``k / n``; ``q`` divides ``n``,
  so the noise is never under-estimated). Past 4096 no ``q`` is sought: the
  noise there (``2 sqrt(0.5 / 4096)`` = 0.022 at ``noise_z`` 2) is under
  AUTOTRAINER's 0.03, on the data sets it was published for (MNIST,
  CIFAR-10: 0.03 is 9 to 17 standard errors) as everywhere that large.
  A PyTorch re-make of AUTOTRAINER's oscillation demo
  (``Oscillating_Loss_Case``: Dense(50, relu), SGD 0.01 with momentum 0.9,
  batch 1, on its 700 training blobs unscaled) swings by 2.8 to 5.9 standard
  errors in five of its six paired swings (``bench/detection/families/
  autotrainer_oscillation.py``); healthy nets on 120-138 samples (``bench/detection``'s wine and
  iris families, the design families of ``noise_z`` 2) by up to 1.45.
* ``validation_regex`` (off by default: AUTOTRAINER reads the training accuracy alone) asks the validation
  accuracy to oscillate too, where the run saves one in EVAL mode: AUTOTRAINER's count over its passes
  (each pass's mean over its first saved steps, as :mod:`validation_passes` reads it), with the same
  ``min_swing``, ``swing_fraction`` and ``noise_z``. Why: under mixup or CutMix the training accuracy is
  counted against mixed targets (a sample half one class and half another is right or wrong by a coin of
  the batch's mixing weight), so it swings on a healthy run while the model's accuracy on clean data
  rises smoothly; a learning rate too high moves the model itself, and both accuracies swing. A run
  without a validation accuracy, or with fewer than ``min_points`` passes, is judged on the training
  accuracy alone.
"""

from __future__ import annotations

import math

from tornasole.exceptions import TensorUnavailable
from tornasole.modes import EVAL, TRAIN
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.overfit import trial_phases
from tornasole.rules.builtin.validation_passes import ValidationPasses, names_in_mode
from tornasole.rules.params import Param

__all__ = ["OscillatingAccuracy", "accuracy_denominator", "epoch_values", "paired_swings"]

#: the largest sample count read from an accuracy's granularity (the module docstring says why)
MAX_DENOMINATOR = 4096
#: how far a saved float32 ``k / n`` may lie from it (float32 rounds values <= 1 within 3e-8); with three
#: values or more (the fewest judged) a count above the true one fits by chance with odds under 1e-6
DENOMINATOR_TOLERANCE = 1e-7


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


def accuracy_denominator(values: list[float]) -> int | None:
    """The smallest ``q <= MAX_DENOMINATOR`` of which every value in [0, 1] is a multiple of ``1 / q``: the
    number of samples an accuracy counts, or a divisor of it. None when there is none (or a value lies
    outside [0, 1]: not a fraction of samples).

    Examples
    --------
    >>> accuracy_denominator([0.0, 0.25, 0.75])
    4
    >>> accuracy_denominator([106 / 138, 131 / 138, 134 / 138])
    138
    >>> accuracy_denominator([0.1234567, 0.7654321, 0.4567891]) is None
    True
    """
    if not values or any(not 0.0 <= v <= 1.0 for v in values):
        return None
    for q in range(1, MAX_DENOMINATOR + 1):
        if all(abs(v * q - round(v * q)) <= DENOMINATOR_TOLERANCE * q for v in values):
            return q
    return None


def swing_z(high: float, low: float, n: int) -> float:
    """The two-proportion z statistic of accuracies ``high`` and ``low`` over ``n`` samples each (pooled
    proportion); infinite when the pooled proportion is 0 or 1 (no sampling noise)."""
    p = (high + low) / 2
    var = 2 * p * (1 - p) / n
    return (high - low) / math.sqrt(var) if var > 0 else math.inf


def paired_swings(
    points: list[float], min_swing: float, n: int | None = None, noise_z: float = 0.0
) -> list[tuple[int, int]]:
    """``(maximum index, minimum index)`` of the paired local extrema of ``points`` that differ by at least
    ``min_swing`` (and, given ``n`` samples and ``noise_z`` > 0, by at least ``noise_z`` standard errors:
    :func:`swing_z`). Endpoints are neither; a point equal to a neighbour is both (a flat stretch).

    Examples
    --------
    >>> paired_swings([0.5, 0.6, 0.5, 0.6, 0.5], 0.03)
    [(1, 2)]
    >>> paired_swings([0.5, 0.6, 0.7, 0.8, 0.9], 0.03)
    []
    >>> paired_swings([0.5, 0.6, 0.5, 0.6, 0.5], 0.03, n=100, noise_z=2)  # 0.1 is 1.4 standard errors
    []
    """
    inner = range(1, len(points) - 1)
    maxima = [i for i in inner if points[i] >= points[i - 1] and points[i] >= points[i + 1]]
    minima = [i for i in inner if points[i] <= points[i - 1] and points[i] <= points[i + 1]]
    pairs = [(hi, lo) for hi, lo in zip(maxima, minima) if points[hi] - points[lo] >= min_swing]
    if n and noise_z > 0:
        pairs = [(hi, lo) for hi, lo in pairs if swing_z(points[hi], points[lo], n) >= noise_z]
    return pairs


class OscillatingAccuracy(ValidationPasses, BuiltinRule):
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
        Param(
            "noise_z",
            "float",
            "0",
            "a swing also exceeds this many standard errors of an accuracy over the samples it counts "
            "(0: off)",
        ),
        Param(
            "validation_regex",
            "regex",
            None,
            "a validation accuracy saved in EVAL mode (re.match) must oscillate too, where one is saved "
            "(None: the training accuracy alone, AUTOTRAINER's criterion)",
        ),
    )
    ACCURACY_PARAM = "validation_regex"
    COLLECTIONS = (("metrics", {"save_interval": "500"}),)

    def check_params(self) -> None:
        self.require_at_least(1, "min_points", "check_every")
        if self.min_swing <= 0:
            raise self.param_error("min_swing", f"value {self.min_swing} must be > 0")
        if self.swing_fraction <= 0:
            raise self.param_error("swing_fraction", f"value {self.swing_fraction} must be > 0")
        if self.noise_z < 0:
            raise self.param_error("noise_z", f"value {self.noise_z} must be >= 0")

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
            n = accuracy_denominator(values) if self.noise_z > 0 else None
            swings = paired_swings(values, self.min_swing, n, self.noise_z)
            needed = self.swing_fraction * len(values)
            validation = self._validation_swings(step) if swings and len(swings) >= needed else None
            if validation == "":
                continue  # the validation accuracy does not oscillate: the model's accuracy is steady
            if swings and len(swings) >= needed:
                noise = (
                    f", each >= noise_z {self.fmt(self.noise_z)} standard errors of an accuracy over {n} "
                    "samples"
                    if n
                    else ""
                )
                shown = ", ".join(
                    f"{self.fmt(values[hi])} (step {points[hi][0]}) / {self.fmt(values[lo])} "
                    f"(step {points[lo][0]})"
                    for hi, lo in swings[-3:]
                )
                self.report_issue(
                    f"{name} (TRAIN): {len(swings)} paired local maxima and minima of the per-epoch "
                    f"accuracy differ by >= min_swing {self.fmt(self.min_swing)} in {len(values)} epochs "
                    f"(>= swing_fraction {self.fmt(self.swing_fraction)} x {len(values)} = "
                    f"{self.fmt(needed)}){noise}; last: {shown}{validation or ''}",
                    tensor=name,
                    value=len(swings),
                    points=len(values),
                    threshold=needed,
                )
                return True
        return False

    def _validation_swings(self, step: int) -> str | None:
        """Whether the validation accuracy oscillates too, judged at TRAIN ``step`` over the validation passes
        that ended before it: None when not asked (``validation_regex`` None), no accuracy matching it was
        saved in EVAL mode, or fewer than ``min_points`` passes ended (the training accuracy judges alone);
        ``""`` when none oscillates; else the message's clause naming the accuracy that does."""
        if self.validation_regex is None:
            return None
        trial = self.base_trial
        judged = False
        for name in names_in_mode(self, self.validation_regex, EVAL):
            steps = [s for s in trial.tensor(name).steps() if s < step]
            passes = [st for mode, st in trial_phases(trial, steps) if mode == EVAL]
            if len(passes) < self.min_points:
                continue
            k = min(len(p) for p in passes)
            means = self._means(name, [p[:k] for p in passes])
            if means is None:
                continue
            judged = True
            n = self._pass_samples(name, [p[:k] for p in passes]) if self.noise_z > 0 else None
            swings = paired_swings(means, self.min_swing, n, self.noise_z)
            if swings and len(swings) >= self.swing_fraction * len(means):
                return (
                    f"; the validation accuracy {name} (EVAL) oscillates too: {len(swings)} paired swings in "
                    f"{len(means)} passes"
                )
        return "" if judged else None

    def _pass_samples(self, name: str, passes: list[list[int]]) -> int | None:
        """The samples a validation pass's mean counts: the sum over its saved steps of each step's own sample
        count, read from that step's values across the passes (:func:`accuracy_denominator`; a pass of one
        saved step, Keras's ``val_accuracy``, is its own count). Why not the means' granularity: six batch
        accuracies of 64, 64, 64, 64, 64 and 40 samples average to multiples of 1/1920, five times the 360
        samples counted, and the sampling noise would be under-estimated by sqrt(1920 / 360). None when a
        step's count is not read (the gate is then off, as for the training accuracy)."""
        total = 0
        for i in range(len(passes[0])):
            q = accuracy_denominator([self.scalar(name, p[i]) for p in passes])
            if q is None:
                return None
            total += q
        return total

"""LearningRateDiscontinuity: the learning rate jumped, or its warmup started over, between saved steps.

A run resumed from a checkpoint without its scheduler's state restarts the schedule: the learning rate
falls back to the start of its warmup, or jumps back to its peak (one public report lost 40% of a run
to this). A healthy schedule moves smoothly: warmup rises, cosine or linear decay falls, by small ratios
between consecutive steps. Each ``lr/<group>`` scalar (:mod:`tornasole.core.llm_signals`) is judged
alone between the evaluated step and the previous saved step of the mode; it fires on

* a **drop**: the rate fell by more than ``max_drop_factor`` times (a warmup restart, a schedule reset
  to 0), unless the previous rate was already below ``min_lr_fraction`` of the peak seen, or the fall
  is no larger than ``max_drop_factor`` times the rate's previous fall (the last steps of a cosine or
  linear decay to 0 fall by large ratios, but by small amounts; a schedule stepped per epoch holds the
  rate between its falls, and its previous fall is the one before that flat stretch);
* a **rise after the peak**: the rate rose by more than ``rise_tolerance`` (as a fraction) while an
  earlier saved rate was already higher than the previous one by that much (the schedule was past its
  peak). Warmup's rise, which has no earlier peak, never fires. Nor does a **warm restart**: a rise
  from below ``restart_below`` of the peak back to no more than the peak. SGDR (Loshchilov & Hutter,
  ICLR'17, Eq. 5; PyTorch's ``CosineAnnealingWarmRestarts``) anneals each cycle to its minimum and only
  then sets the rate back to its maximum; a resume that lost the scheduler's state jumps back while the
  rate is mid-decay, well above a tenth of the peak (a cosine cycle spends its last fifth below 0.1 of
  its peak, so a save interval of up to a fifth of the cycle still sees the bottom).

Planned discontinuities are the user's to declare: ``allow_drops`` passes over every drop (a step
schedule: StepLR, MultiStepLR, ReduceLROnPlateau), and ``planned_steps`` lists the global steps at
which the schedule jumps on purpose (milestones, cosine restarts): a change between two saved steps
that bracket one of them is not judged. The peak is the largest rate among the previous ``window``
saved steps.

Why 3 for ``max_drop_factor``: no smooth schedule falls by 3x in one step before its tail (cosine's
steepest step is ``pi / (2 * steps)`` of the peak; exponential decay falls by a constant ratio, which the
previous step's fall matches), while a restarted warmup starts at ``peak / warmup_steps``, 10x or more
below a rate that is mid-decay.
"""

from __future__ import annotations

from tornasole.core.llm_signals import LEARNING_RATE, signal_regex
from tornasole.modes import EVAL, PREDICT
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.series import names_matching
from tornasole.rules.params import Param

__all__ = ["LearningRateDiscontinuity"]


class LearningRateDiscontinuity(BuiltinRule):
    """Fires on a learning-rate drop by ``max_drop_factor`` or a rise after the schedule's peak.

    Examples
    --------
    >>> # invoke_rule(LearningRateDiscontinuity(trial, max_drop_factor="5", planned_steps="3000,6000"))
    """

    LIKELY_CAUSE = (
        "the learning rate of {tensor} jumped between two steps: the scheduler restarted (a resume that "
        "did not restore the scheduler's state) or a schedule has a discontinuity"
    )
    SUGGESTED_FIX = (
        "restore the scheduler's state_dict (and the data loader's position) with the checkpoint; if the "
        "jump is planned, list its step in planned_steps or set allow_drops for a step schedule"
    )

    PARAMETERS = (
        Param("max_drop_factor", "float", "3", "fire when the rate falls by more than this factor"),
        Param("rise_tolerance", "float", "0.1", "fire when, past the peak, the rate rises by more than this"),
        Param(
            "min_lr_fraction", "float", "0.01", "drops from below this fraction of the peak are not judged"
        ),
        Param(
            "restart_below",
            "float",
            "0.1",
            "a rise from below this fraction of the peak to at most the peak is a warm restart (0: off)",
        ),
        Param("allow_drops", "bool", "False", "a step schedule: no drop fires"),
        Param("planned_steps", "int_list", "", "global steps at which the schedule jumps on purpose"),
        Param("window", "int", "100", "previous saved steps searched for the peak"),
    )

    def check_params(self) -> None:
        if self.max_drop_factor <= 1:
            raise self.param_error("max_drop_factor", f"value {self.max_drop_factor} must be > 1")
        self.require_at_least(0, "rise_tolerance", "min_lr_fraction", "restart_below")
        self.require_at_least(1, "window")

    def history_steps(self) -> int | None:
        return self.window

    def invoke_at_step(self, step: int) -> bool:
        if self.step_mode(step) in (EVAL, PREDICT):
            return False
        return any(
            self._judge(n, step) for n in names_matching(self, step, signal_regex(LEARNING_RATE, True))
        )

    def _planned(self, prev: int, step: int) -> bool:
        return any(prev < p <= step for p in self.planned_steps or ())

    def _smooth_fall(self, values: list, lr: float, prev_lr: float) -> bool:
        """The fall is no larger than ``max_drop_factor`` times the rate's previous change, when that was a
        fall: a decay to 0 (linear decay's last step halves, then zeroes the rate, by equal decrements).

        The previous change is the last one before the saved steps at ``prev_lr``: a schedule stepped once
        per epoch (PyTorch's ``scheduler.step()`` after each epoch) holds the rate for an epoch's saved
        steps, so the fall before the flat stretch is its previous step, not the zero change inside it. Its
        cosine's last epochs fall by more than 3x each (the softmax family's 15 epochs: 5.7e-4 to 1.5e-4
        of a peak of 1e-2, after 2.2e-3 to 5.7e-4), by less than the epoch before."""
        j = len(values) - 2
        while j >= 1 and values[j - 1] is not None and values[j - 1] == values[j]:
            j -= 1
        before = values[j - 1] if j >= 1 else None
        if before is None or values[j] is None or before <= values[j]:
            return False
        return prev_lr - lr <= self.max_drop_factor * (before - values[j])

    def _judge(self, name: str, step: int) -> bool:
        steps = self.same_mode_steps(name, step)[-(self.window + 1) :]
        if len(steps) < 2 or steps[-1] != step:
            return False
        values = [self.scalar(name, s) for s in steps]
        lr, prev_lr, prev = values[-1], values[-2], steps[-2]
        if lr is None or prev_lr is None or self._planned(prev, step):
            return False
        earlier = [v for v in values[:-1] if v is not None]
        peak = max(earlier)
        if (
            not self.allow_drops
            and prev_lr > 0
            and lr * self.max_drop_factor < prev_lr
            and prev_lr >= self.min_lr_fraction * peak
            and not self._smooth_fall(values, lr, prev_lr)
        ):
            self.report_issue(
                f"{name} fell from {self.fmt(prev_lr)} at step {prev} to {self.fmt(lr)} at step {step} "
                f"(more than max_drop_factor {self.fmt(self.max_drop_factor)} times; peak {self.fmt(peak)})",
                tensor=name,
                value=lr,
                previous=prev_lr,
                criterion="drop",
            )
            return True
        past_peak = peak > prev_lr * (1 + self.rise_tolerance)
        warm_restart = prev_lr < self.restart_below * peak and lr <= peak * (1 + self.rise_tolerance)
        if past_peak and lr > prev_lr * (1 + self.rise_tolerance) and not warm_restart:
            self.report_issue(
                f"{name} rose from {self.fmt(prev_lr)} at step {prev} to {self.fmt(lr)} at step {step} "
                f"after the schedule had peaked at {self.fmt(peak)} "
                f"(rise_tolerance {self.fmt(self.rise_tolerance)})",
                tensor=name,
                value=lr,
                previous=prev_lr,
                criterion="rise",
            )
            return True
        return False

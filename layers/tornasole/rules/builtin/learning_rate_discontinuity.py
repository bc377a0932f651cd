"""LearningRateDiscontinuity: the learning rate jumped, or its warmup started over, between saved steps.

A run resumed from a checkpoint without its scheduler's state restarts the schedule: the learning rate
falls back to the start of its warmup, or jumps back to its peak (one public report lost 40% of a run
to this). A healthy schedule moves smoothly: warmup rises, cosine or linear decay falls, by small ratios
between consecutive steps. Each ``lr/<group>`` scalar (:mod:`tornasole.core.llm_signals`) is judged
alone between the evaluated step and the previous saved step of the mode; it fires on

* a **restart**: the rate fell by more than ``max_drop_factor`` times and then, at the first saved step
  where it changed again, rose by more than ``rise_tolerance`` (as a fraction). A restarted warmup starts
  low and climbs by a constant amount every step (gradual warmup: Goyal et al. 2017, "Accurate, Large
  Minibatch SGD", Sec. 2.2; Megatron-LM's and OLMo's linear warmups), while a step schedule holds its new
  rate until the next milestone or keeps decaying (PyTorch's ``StepLR``/``MultiStepLR`` multiply the rate
  by ``gamma`` at a milestone and hold it; ``ReduceLROnPlateau`` only ever lowers it). The two look the
  same at the drop and differ at the rate's next change, so the drop is judged there: one saved step later
  for a warmup restarted per step, at the end of the held epoch for a warmup stepped per epoch. The saved
  steps of the flat stretch are read back as far as ``window`` (the serverless evaluator loads at most 64).
  A drop is not judged when the rate before it was already below ``min_lr_fraction`` of the peak seen, or
  when the fall is no larger than ``max_drop_factor`` times the rate's previous fall (the last steps of a
  cosine or linear decay to 0 fall by large ratios, but by small amounts; a schedule stepped per epoch
  holds the rate between its falls, and its previous fall is the one before that flat stretch);
* a **zeroed rate**: the rate fell by more than ``max_drop_factor`` times to 0 or below (a scheduler bug,
  a lambda that returns 0). It fires at the drop, since no multiplicative schedule ever reaches 0 and the
  additive ones (linear, cosine to 0) reach it by a smooth fall, which is not judged;
* a **rise after the peak**: the rate rose by more than ``rise_tolerance`` (as a fraction) while an
  earlier saved rate was already higher than the previous one by that much (the schedule was past its
  peak). Warmup's rise, which has no earlier peak, never fires. Nor does a **warm restart**: a rise
  from below ``restart_below`` of the peak back to no more than the peak. SGDR (Loshchilov & Hutter,
  ICLR'17, Eq. 5; PyTorch's ``CosineAnnealingWarmRestarts``) anneals each cycle to its minimum and only
  then sets the rate back to its maximum; a resume that lost the scheduler's state jumps back while the
  rate is mid-decay, well above a tenth of the peak (a cosine cycle spends its last fifth below 0.1 of
  its peak, so a save interval of up to a fifth of the cycle still sees the bottom). Nor does a rise from
  the **flat bottom** of a decay (:meth:`LearningRateDiscontinuity._restart_from_flat_bottom`): a cosine
  annealed to an ``eta_min`` above a tenth of the peak, or a cycle longer than the window (the serverless
  evaluator loads 64 saved steps), where neither the true peak nor a rate under a tenth of it is seen.

A drop to a small rate that stays flat (a bug that divides the rate by 1000) reads as a step schedule's
drop and does not fire here; its effect on the loss and the updates is the loss and update rules' to see.

Planned discontinuities are the user's to declare: ``planned_steps`` lists the global steps at which the
schedule jumps on purpose (restarts, stages): a change between two saved steps that bracket one of them is
not judged, and the schedule's peak is searched only after it (a planned restart's warmup climbs again).
``allow_drops`` passes over every drop, a zeroed rate included. The peak is the largest rate among the
previous ``window`` saved steps.

Why 3 for ``max_drop_factor``: no smooth schedule falls by 3x in one step before its tail (cosine's
steepest step is ``pi / (2 * steps)`` of the peak; exponential decay falls by a constant ratio, which the
previous step's fall matches), while a restarted warmup starts at ``peak / warmup_steps``, 10x or more
below a rate that is mid-decay. A step schedule's ``gamma`` of 0.1 (or the families' 0.3) falls by more,
which is why a drop alone is not a finding. The rise that confirms a restart is 2x or more, far above
``rise_tolerance``: a linear warmup from ``peak / warmup_steps`` seen ``m`` steps after it restarted,
and again one save interval ``k`` later, rose by ``(m + k + 1) / (m + 1)``, at least 2 since ``m < k``.
"""

from __future__ import annotations

from tornasole.modes import EVAL, PREDICT
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.series import LEARNING_RATES, names_matching
from tornasole.rules.params import Param

__all__ = ["LearningRateDiscontinuity"]

# a warm restart from a flattened decay (``_restart_from_flat_bottom``): at least this many falls since the
# window's highest rate, the last at most this share of the steepest, the steepest at most this share of the
# whole decline
FLAT_FALLS = 4
FLAT_LAST_FALL = 0.25
SPREAD_FALL = 0.5


class LearningRateDiscontinuity(BuiltinRule):
    """Fires on a learning-rate drop that climbs again (a restarted warmup) or hits 0, or a rise past a peak.

    Examples
    --------
    >>> # invoke_rule(LearningRateDiscontinuity(trial, max_drop_factor="5", planned_steps="3000,6000"))
    """

    LIKELY_CAUSE = (
        "the learning rate of {tensor} jumped between two steps: the scheduler restarted (a resume that "
        "did not restore the scheduler's state) or a schedule zeroed or reset the rate"
    )
    SUGGESTED_FIX = (
        "restore the scheduler's state_dict (and the data loader's position) with the checkpoint; if the "
        "jump is planned, list its step in planned_steps"
    )

    PARAMETERS = (
        Param(
            "max_drop_factor",
            "float",
            "3",
            "fire when the rate falls by more than this factor and then climbs again, or falls to 0",
        ),
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
        Param("allow_drops", "bool", "False", "no drop fires (a zeroed rate included)"),
        Param("planned_steps", "int_list", "", "global steps at which the schedule jumps on purpose"),
        Param("window", "int", "100", "previous saved steps searched for the peak and a restart's drop"),
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
        return any(self._judge(n, step) for n in names_matching(self, step, LEARNING_RATES))

    def _planned(self, prev: int, step: int) -> bool:
        return any(prev < p <= step for p in self.planned_steps or ())

    def _since_planned(self, steps: list) -> list:
        """The saved steps from the first one at or after the last planned jump: a planned restart starts a
        new phase of the schedule, so its warmup's climb is not a rise past the earlier peak."""
        planned = [p for p in self.planned_steps or () if steps and steps[0] < p <= steps[-1]]
        if not planned:
            return steps
        last = max(planned)
        return [s for s in steps if s >= last]

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

    def _judged_drop(self, steps: list, values: list, i: int) -> bool:
        """The change from saved step ``i - 1`` to ``i`` is a drop this rule judges: by more than
        ``max_drop_factor``, from at least ``min_lr_fraction`` of the peak before it, not a smooth fall and
        not planned."""
        before, after = values[i - 1], values[i]
        if self.allow_drops or before is None or after is None or self._planned(steps[i - 1], steps[i]):
            return False
        peak = max(v for v in values[:i] if v is not None)
        return (
            before > 0
            and after * self.max_drop_factor < before
            and before >= self.min_lr_fraction * peak
            and not self._smooth_fall(values[: i + 1], after, before)
        )

    def _restart_drop(self, values: list, lr: float, prev_lr: float) -> int | None:
        """The index of the drop that the rise to ``lr`` confirms as a restart: the rate rose by more than
        ``rise_tolerance`` from ``prev_lr``, and the change into the flat stretch that ends at ``prev_lr``
        (one saved step long for a warmup restarted per step) was a drop; None otherwise."""
        if lr <= prev_lr * (1 + self.rise_tolerance):
            return None
        j = len(values) - 2
        while j >= 1 and values[j - 1] is not None and values[j - 1] == values[j]:
            j -= 1
        return j if j >= 1 else None

    def _restart_from_flat_bottom(self, steps: list, values: list, lr: float) -> bool:
        """The rise to ``lr`` follows a decay that had flattened out at its bottom, to a rate the schedule
        could have started its cycle at: a warm restart whose floor is above ``restart_below`` of the peak
        (a cosine to ``eta_min``), or whose cycle is longer than the window.

        From the window's highest rate to the last one, the rate only fell (by ``FLAT_FALLS`` or more
        falls), its last fall was at most ``FLAT_LAST_FALL`` of its steepest (a cosine's slope vanishes at
        its bottom; a resume mid-decay jumps while the rate still falls steeply), and its steepest fall was
        at most ``SPREAD_FALL`` of the whole decline (a step schedule's drop is one fall, the whole decline).
        The new rate is at most the peak (within ``rise_tolerance``), or, when the window starts mid-decay
        (its first rate is its highest and its first step is not step 0: the cycle's peak lies before the
        window, as when the serverless evaluator loads the last 64 saved steps of a longer cycle), at most
        the window's highest rate over ``restart_below``. ``restart_below`` 0 turns this reading off too."""
        seen = [v for v in values if v is not None]
        if self.restart_below <= 0 or len(seen) < 2:
            return False
        top = seen.index(max(seen))
        peak_before_window = top == 0 and steps[0] > 0
        decay = seen[top:]
        if any(b > a * (1 + self.rise_tolerance) for a, b in zip(decay, decay[1:], strict=False)):
            return False
        falls = [a - b for a, b in zip(decay, decay[1:], strict=False) if a > b]
        decline = decay[0] - decay[-1]
        if len(falls) < FLAT_FALLS or decline <= 0:
            return False
        steepest = max(falls)
        if falls[-1] > FLAT_LAST_FALL * steepest or steepest > SPREAD_FALL * decline:
            return False
        cap = decay[0] / self.restart_below if peak_before_window else decay[0] * (1 + self.rise_tolerance)
        return lr <= cap

    def _judge(self, name: str, step: int) -> bool:
        steps = self._since_planned(self.same_mode_steps(name, step)[-(self.window + 1) :])
        if len(steps) < 2 or steps[-1] != step:
            return False
        values = [self.scalar(name, s) for s in steps]
        lr, prev_lr, prev = values[-1], values[-2], steps[-2]
        if lr is None or prev_lr is None or self._planned(prev, step):
            return False
        earlier = [v for v in values[:-1] if v is not None]
        peak = max(earlier)
        last = len(values) - 1
        if lr <= 0 and self._judged_drop(steps, values, last):
            self.report_issue(
                f"{name} fell from {self.fmt(prev_lr)} at step {prev} to {self.fmt(lr)} at step {step} "
                f"(zeroed; peak {self.fmt(peak)})",
                tensor=name,
                value=lr,
                previous=prev_lr,
                criterion="drop",
            )
            return True
        j = self._restart_drop(values, lr, prev_lr)
        if j is not None and self._judged_drop(steps, values, j):
            self.report_issue(
                f"{name} fell from {self.fmt(values[j - 1])} at step {steps[j - 1]} to {self.fmt(values[j])} "
                f"at step {steps[j]} (more than max_drop_factor {self.fmt(self.max_drop_factor)} times; peak "
                f"{self.fmt(peak)}) and climbed again to {self.fmt(lr)} at step {step}: its warmup started "
                "over",
                tensor=name,
                value=values[j],
                previous=values[j - 1],
                drop_step=steps[j],
                criterion="drop",
            )
            return True
        past_peak = peak > prev_lr * (1 + self.rise_tolerance)
        warm_restart = prev_lr < self.restart_below * peak and lr <= peak * (1 + self.rise_tolerance)
        if past_peak and lr > prev_lr * (1 + self.rise_tolerance) and not warm_restart:
            warm_restart = self._restart_from_flat_bottom(steps[:-1], values[:-1], lr)
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

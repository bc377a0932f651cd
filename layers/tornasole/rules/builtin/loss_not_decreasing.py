"""LossNotDecreasing: the loss stopped going down.

Choices:

* Losses: the ``losses`` collection (``use_losses_collection``), plus
  ``collection_names`` and ``tensor_regex``; each loss tensor is judged alone.
* Mode: ``mode`` if given: only global steps of that mode are evaluated, and
  steps are that mode's steps. Unset: every mode is judged on its own, in its
  own steps (validation losses against validation losses, training against
  training; a trial without modes is GLOBAL). Why not "EVAL only when there is
  an EVAL loss": with one validation pass per epoch, EVAL losses ``num_steps``
  EVAL steps apart are ``num_steps`` epochs apart, so a run shorter than that
  was never checked at all; the training loss is checked too.
* "Evaluated every num_steps": a step is an evaluation point when it is the
  first saved step of its bucket ``[k * num_steps, (k + 1) * num_steps)``. This
  needs only the step and the previous saved step, so ``invoke_rule`` over a
  whole run and the serverless evaluator (which loads a few earlier steps)
  agree on the points.
* At a point s the loss is compared with the loss at the newest saved step
  <= s - num_steps: it fires when it is not lower by at least ``diff_percent`` %
  (of the previous loss's magnitude). It also fires when the loss is more than
  ``increase_threshold_percent`` % above the lowest loss of the earlier
  evaluation points the trial holds (a rebound, even when the previous point
  was already bad).
* ``window`` (Tornasole's addition; 1 = SageMaker's reading): each compared
  loss is the mean over the ``window`` newest saved steps of the mode ending at
  the compared step. One training batch's loss is noisy enough to "rise" over
  any interval on a healthy run; a mean over a few saved steps is not.
* ``reference`` (Tornasole's addition; ``previous`` = SageMaker's reading):
  ``first`` compares with the run's start instead (the first ``window`` saved
  steps of the mode): "the loss has not come down by ``diff_percent`` % since
  training began". Why: a healthy run that has converged also stops
  decreasing from one interval to the next, so ``previous`` cannot tell it from
  a run that never learned; only the distance from the start can. It fires
  only while *no* evaluation point so far (the current one included) was that
  far below the start: a run that learned within its first window and then
  sits on a noisy plateau (label noise keeps its loss high) did come down, and
  a later window that happens to be close to the first one does not undo that.
  A NaN loss still fires. This reads every earlier evaluation point
  (``history_steps`` is then None; the serverless evaluator caps that at its
  history window, so there "so far" means the points it loaded, besides the
  run's first steps, which it always loads for ``first``).
* ``patience`` (Tornasole's addition; 1 = SageMaker's reading): the decrease
  check fires only when it failed at this evaluation point *and* at the
  ``patience - 1`` comparable evaluation points before it (the plateau
  persisted over ``patience`` checks). Why: early in a run a slow start and a
  stall have the same loss curve (sigmoid nets, warm-ups, narrow or small-init
  nets sit near the starting loss for an epoch or two, then learn); one more
  check tells them apart. A NaN loss and the rebound check do not wait.
* ``noise_sigmas`` (Tornasole's addition; 0 = off, SageMaker's reading): with
  ``window`` > 1, the decrease check fails only where the compared mean lies
  above the threshold by at least this many standard errors of the difference
  of the two windows' means (each window's sample standard deviation over the
  square root of its length). Why: with batches of one or two samples each
  saved loss is a sample's loss, and a window of five of them moves by a third
  of its value from one window to the next on a run that learns; a stalled run's
  losses barely move within a window, so its shortfall is many standard errors
  wide. A window whose losses are all equal has no noise to allow for.
* ``warmup_rise_percent`` (Tornasole's addition; negative = off, SageMaker's reading): the decrease check
  does not fire at an evaluation point where a saved learning rate (``lr/<group>``,
  :mod:`tornasole.core.llm_signals`; both hooks save it) is more than this % above its value ``num_steps``
  steps earlier: the schedule is still warming up. Why: a linear warmup from 0 (Goyal et al. 2017,
  "gradual warmup"; Keras's ``CosineDecay(warmup_steps=...)`` and transformers' recipes start at exactly
  0) moves the weights by step sizes near 0 for its first part, so the loss cannot be expected to fall
  yet; one epoch of warmup at batch 4 is hundreds of steps at chance. A stalled run under a constant or
  decaying rate is judged as before, and so is a loss still flat once the rate stops rising (the points
  checked during the warmup still count toward ``patience``: a run that learned nothing by the warmup's
  end fires at the first point after it). A trial that saves no rate is judged as before. The rebound
  check and a NaN loss do not wait.
* Rebound with ``window`` > 1: the rise counts only when *every* loss of the
  current window is above the threshold, not just their mean. Why: with a batch
  of one sample, one misclassified sample lifts a window's mean tenfold over a
  lucky earlier window; a loss that really went back up stays up. With
  ``window=1`` this is SageMaker's reading.
"""

from __future__ import annotations

import math

from tornasole.modes import ModeKeys
from tornasole.rules.builtin.base import COLLECTION_NAMES, TENSOR_REGEX, BuiltinRule
from tornasole.rules.builtin.losses import at_mode_step, loss_names
from tornasole.rules.builtin.series import learning_rate_names, rate_at
from tornasole.rules.params import Param

__all__ = ["LossNotDecreasing"]


def evaluation_points(steps: list[int], num_steps: int) -> list[int]:
    """Saved steps that are the first of their ``num_steps`` bucket."""
    points: list[int] = []
    prev = None
    for s in steps:
        if prev is None or s // num_steps != prev // num_steps:
            points.append(s)
        prev = s
    return points


class LossNotDecreasing(BuiltinRule):
    """Fires when a loss did not fall by ``diff_percent`` % over ``num_steps`` steps.

    Examples
    --------
    >>> # invoke_rule(LossNotDecreasing(trial, num_steps="10", diff_percent="0.1", mode="TRAIN"))
    """

    LIKELY_CAUSE = (
        "the loss stopped decreasing: learning rate too low or too high, parameters not in the optimiser,"
        " or labels that do not match the inputs; or a plateau the run will leave (a recurrent net learning a"
        " long-range dependency can sit at chance for several epochs first)"
    )
    SUGGESTED_FIX = (
        "check that every parameter reaches the optimiser, try the learning rate 10x up and 10x down, "
        "check the labels; for a recurrent net on long sequences whose pipeline checks out, a few more "
        "epochs first"
    )

    PARAMETERS = (
        COLLECTION_NAMES,
        TENSOR_REGEX,
        Param("use_losses_collection", "bool", "True", "also inspect the losses collection"),
        Param("num_steps", "int", "10", "steps between comparisons"),
        Param("diff_percent", "float", "0.1", "minimum decrease (%) expected over num_steps"),
        Param("increase_threshold_percent", "float", "5", "rise (%) above the lowest loss that fires"),
        Param("mode", "mode", None, "TRAIN, EVAL or GLOBAL (unset: each mode in its own steps)"),
        Param("window", "int", "1", "saved steps of the mode averaged into each compared loss"),
        Param("patience", "int", "1", "consecutive evaluation points that must fail the decrease check"),
        Param(
            "noise_sigmas",
            "float",
            "0",
            "standard errors by which a window's mean must exceed the threshold to fail (0: off)",
        ),
        Param(
            "reference",
            "str",
            "previous",
            "previous: the loss num_steps earlier; first: the run's first loss",
        ),
        Param(
            "warmup_rise_percent",
            "float",
            "-1",
            "no decrease check while a saved learning rate rose by more than this % over num_steps "
            "(a warmup); negative: off",
        ),
    )
    COLLECTIONS = (("losses", {"save_interval": "500"}),)

    def check_params(self) -> None:
        self.require_at_least(1, "num_steps")
        if self.reference not in ("previous", "first"):
            raise self.param_error("reference", f"value {self.reference!r} must be 'previous' or 'first'")
        self.require_at_least(1, "window", "patience")
        if not 0 <= self.noise_sigmas <= 100:
            raise self.param_error("noise_sigmas", f"value {self.noise_sigmas} must be within [0, 100]")
        if math.isnan(self.warmup_rise_percent):
            raise self.param_error("warmup_rise_percent", "value nan must be a number")
        if not 0 <= self.diff_percent <= 100:
            raise self.param_error("diff_percent", f"value {self.diff_percent} must be within [0, 100]")

    def history_steps(self) -> int | None:
        if self.reference == "first":
            return None  # every earlier evaluation point: has the loss ever come down?
        # the other mode's steps may be interleaved; ``patience`` looks back that many evaluation points
        return 2 * (self.num_steps * self.patience + self.window)

    def leading_steps(self) -> int:
        # ``first``: the first ``window`` saved steps of each mode; the modes' steps may be interleaved.
        return 4 * self.window if self.reference == "first" else 0

    def _window_losses(self, name: str, steps: list[int], at: int, mode: object) -> list[float] | None:
        """The losses of the ``window`` saved steps of ``mode`` ending at mode step ``at``."""
        i = steps.index(at)
        values = [self.scalar(name, s, mode=mode) for s in steps[max(0, i - self.window + 1) : i + 1]]
        return None if any(v is None for v in values) else values

    def _window_stats(self, name: str, steps: list[int], at: int, mode: object) -> tuple[float, float] | None:
        """(mean, squared standard error of the mean) of the ``window`` saved losses of ``mode`` ending at
        mode step ``at``; the error is nan for a window of one loss.

        Memoised per rule instance: every evaluation point re-reads the earlier points' means (the
        rebound's lowest, ``first``'s "came down"; ``noise_sigmas`` the first window's noise), and a saved
        step's losses never change.
        """
        key = (name, str(mode), at, steps.index(at))
        cache = self.__dict__.setdefault("_window_stats_cache", {})
        if key in cache:
            return cache[key]
        values = self._window_losses(name, steps, at, mode)
        if values is None:
            return None  # not readable yet: ask again next time
        n = len(values)
        mean = sum(values) / n
        sem2 = sum((v - mean) ** 2 for v in values) / (n - 1) / n if n > 1 else math.nan
        cache[key] = (mean, sem2)
        return cache[key]

    def _loss(self, name: str, steps: list[int], at: int, mode: object) -> float | None:
        """Mean loss over the ``window`` saved steps of ``mode`` ending at mode step ``at``."""
        stats = self._window_stats(name, steps, at, mode)
        return None if stats is None else stats[0]

    def _came_down(
        self, name: str, steps: list[int], points: list[int], first: int, below: float, mode: object
    ) -> int | None:
        """An earlier evaluation point whose loss was at or under ``below`` (``reference=first``), or None."""
        start = steps.index(first)
        for p in points:
            if steps.index(p) - start < self.window:
                continue
            loss = self._loss(name, steps, p, mode)
            if loss is not None and loss <= below:
                return p
        return None

    def _compare(
        self, name: str, steps: list[int], points: list[int], cur: int, mode: object
    ) -> tuple[float, float, int, float, bool] | None:
        """At evaluation point ``cur``: (loss, compared loss, its step, threshold, failed), or None when
        ``cur`` has nothing to compare with yet (or its losses are not readable)."""
        older = [s for s in steps if s <= cur - self.num_steps]
        if not older:
            return None
        prev = older[-1] if self.reference == "previous" else steps[min(self.window, len(steps)) - 1]
        if steps.index(cur) - steps.index(prev) < self.window:
            return None  # the compared windows would overlap
        loss, before = self._loss(name, steps, cur, mode), self._loss(name, steps, prev, mode)
        if loss is None or before is None:
            return None
        below = before - abs(before) * self.diff_percent / 100.0
        not_lower = loss > below
        if not_lower and self.noise_sigmas > 0 and self.window > 1:
            se = self._standard_error(name, steps, cur, prev, mode)
            not_lower = se is None or loss - below >= self.noise_sigmas * se
        if not_lower and self.reference == "first":
            earlier = [p for p in points if p < cur]
            not_lower = self._came_down(name, steps, earlier, prev, below, mode) is None
        return loss, before, prev, below, not_lower

    def _standard_error(self, name: str, steps: list[int], cur: int, prev: int, mode: object) -> float | None:
        """The standard error of the difference between the means of the windows ending at ``cur`` and at
        ``prev`` (None when a window has fewer than two readable losses: nothing to estimate noise from)."""
        var = 0.0
        for at in (cur, prev):
            stats = self._window_stats(name, steps, at, mode)
            if stats is None or math.isnan(stats[1]):
                return None
            var += stats[1]
        return math.sqrt(var)

    def _noise_note(
        self, name: str, steps: list[int], cur: int, prev: int, excess: float, mode: object
    ) -> str:
        """What the firing says about the windows' noise, when ``noise_sigmas`` is on."""
        if self.noise_sigmas <= 0 or self.window <= 1 or math.isnan(excess):
            return ""
        se = self._standard_error(name, steps, cur, prev, mode)
        if se is None:
            return "; too few losses in a window to estimate their noise"
        return (
            f"; {self.fmt(excess)} above the threshold, >= noise_sigmas {self.fmt(self.noise_sigmas)} x "
            f"the standard error {self.fmt(se)} of the windows' means"
        )

    def _persisted(self, name: str, steps: list[int], points: list[int], mode: object) -> bool:
        """The decrease check also failed at the ``patience - 1`` comparable points before the last."""
        needed = self.patience - 1
        for p in reversed(points[:-1]):
            if needed == 0:
                return True
            got = self._compare(name, steps, points, p, mode)
            if got is None:
                return False  # fewer comparable points than ``patience`` so far
            if not got[4]:
                return False
            needed -= 1
        return needed == 0

    def _global_step(self, mode_step: int, mode: object) -> int | None:
        if mode == ModeKeys.GLOBAL:
            return mode_step
        return self.base_trial.global_step(mode, mode_step)

    def _warming_up(self, steps: list[int], cur: int, mode: object) -> tuple[str, float, float] | None:
        """(name, rate ``num_steps`` steps before ``cur``, rate at ``cur``) of a saved learning rate that
        rose by more than ``warmup_rise_percent`` % over that span; None when none did (or none is saved,
        or the deferral is off)."""
        if self.warmup_rise_percent < 0:
            return None
        older = [s for s in steps if s <= cur - self.num_steps]
        if not older:
            return None
        now, before = self._global_step(cur, mode), self._global_step(older[-1], mode)
        if now is None or before is None:
            return None
        for name in learning_rate_names(self):
            rate, earlier = rate_at(self, name, now), rate_at(self, name, before)
            if rate is None or earlier is None or not (math.isfinite(rate) and math.isfinite(earlier)):
                continue
            if rate > earlier + abs(earlier) * self.warmup_rise_percent / 100.0:
                return name, earlier, rate
        return None

    def advice(self) -> tuple[str, str] | None:
        """A loss that rose far above its lowest value diverged; one that stays flat stalled."""
        if "lowest" in self._values:
            return (
                "the loss rose far above its lowest value: the training diverged (learning rate too high, "
                "a schedule that restarted high)",
                "lower the learning rate or add a warmup, and clip gradients",
            )
        return super().advice()

    def invoke_at_step(self, step: int) -> bool:
        for name in loss_names(self, self.use_losses_collection):
            tensor = self.base_trial.tensor(name)
            mode = self.step_mode(step) if self.mode is None else self.mode
            cur = at_mode_step(self.base_trial, step, mode)
            if cur is None:
                continue
            steps = tensor.steps(mode=mode)
            points = evaluation_points([s for s in steps if s <= cur], self.num_steps)
            if not points or points[-1] != cur:
                continue
            got = self._compare(name, steps, points, cur, mode)
            if got is None:
                continue
            loss, before, prev, below, not_lower = got
            if not_lower and not math.isnan(loss) and self.patience > 1:
                not_lower = self._persisted(name, steps, points, mode)
            if not_lower and not math.isnan(loss) and self._warming_up(steps, cur, mode) is not None:
                not_lower = False  # the rate is still rising: too early to expect the loss to fall
            where = f"{name} ({mode.name} step {cur})"
            if self.window > 1:
                where = f"mean {name} over {self.window} saved steps ({mode.name} step {cur})"
            # A NaN loss has not decreased (the comparison alone would say nothing about it).
            if math.isnan(loss) or not_lower:
                self.report_issue(
                    f"{where}={self.fmt(loss)} is not {self.fmt(self.diff_percent)}% below "
                    f"{self.fmt(before)} at step {prev} (threshold {self.fmt(below)})"
                    + (" and no earlier evaluation point was" if self.reference == "first" else "")
                    + (f", at {self.patience} evaluation points running" if self.patience > 1 else "")
                    + self._noise_note(name, steps, cur, prev, loss - below, mode),
                    tensor=name,
                    value=loss,
                    previous=before,
                    previous_step=prev,
                    threshold=below,
                )
                return True
            earlier = [v for v in (self._loss(name, steps, p, mode) for p in points[:-1]) if v is not None]
            if earlier:
                best = min(earlier)
                limit = best + abs(best) * self.increase_threshold_percent / 100.0
                window_values = self._window_losses(name, steps, cur, mode) or [loss]
                if min(window_values) > limit:
                    every = (
                        f" (each of its {len(window_values)} losses, lowest {self.fmt(min(window_values))})"
                    )
                    self.report_issue(
                        f"{where}={self.fmt(loss)}{every if self.window > 1 else ''} is more than "
                        f"{self.fmt(self.increase_threshold_percent)}% above the lowest loss "
                        f"{self.fmt(best)} (threshold {self.fmt(limit)})",
                        tensor=name,
                        value=loss,
                        lowest=best,
                        threshold=limit,
                    )
                    return True
        return False

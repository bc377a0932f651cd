"""WeightUpdateRatio: weights change far too much, or not at all, between steps.

Chosen reading: per weight tensor, ratio = ||w_s - w_p||_2 / (||w_p||_2 + epsilon)
(L2 norms of the whole tensor), where p is the previous saved step of that
tensor (``num_steps`` unset) or the newest saved step <= s - num_steps. It fires
when the ratio is above ``large_threshold`` (learning rate too high) or below
``small_threshold`` (updates vanished or weights frozen). A tensor without an
earlier step is not checked (the rule needs weights at two steps).

Modes: weights only change in training, so the rule is evaluated at TRAIN
steps (and at GLOBAL steps of a trial saved without modes), and p is an earlier
step **of the same mode**, with ``num_steps`` counted in that mode's steps.
Comparing the weights of an EVAL step with those of the next TRAIN step (equal,
ratio 0) would report "updates vanished" on every run with a validation phase.

``skip_frozen`` (off by default): a weight saved with no gradient at a step
that saved gradients of other layers is a layer frozen on purpose
(``requires_grad=False``), not updates that vanished
(:meth:`BuiltinRule.frozen_on_purpose`). On the families benchmark
(``bench/detection/families``) fine-tuning-style runs with a frozen first layer
fired in every family.

``small_window`` (1 by default: the step compared): "below ``small_threshold``"
must also hold between the evaluated step and the saved step that many saved
steps back in its mode. Gradient accumulation updates the weights every few
batches, so two saved steps inside one accumulation window are equal on a
healthy run; a layer that never learns stays equal across any window.

``skip_idle_model`` (off by default): a window in which *no* weight of the model moved (every weight
tensor saved at both steps exactly equal, two at least) is a window without an optimiser update, not a
layer that stopped learning: gradient accumulation over more batches than the save interval, an fp16 step
the loss scaler skipped, or the first update of a warmup that starts at rate 0 (a linear warmup computed as
``step / warmup_steps``, Hugging Face's ``get_linear_schedule_with_warmup`` among them, gives the first
optimiser step the rate 0). Such a window fires only when the window before it was idle too: a model that
stopped moving altogether (a scheduler that zeroed the rate) fires one saved step later than before, and
a layer the optimiser never sees, while the others move, fires as before. One tensor alone cannot tell the
two apart and is judged as without the option. Nor is a window skipped when every one of those weights has
a gradient saved at the step and all of them are exactly zero: a model that cannot move (every ReLU dead)
is judged at once, where accumulated, skipped or warmed-up-from-0 updates still have their gradients.
Designed on the families benchmark's held-out ``diabetes_huber`` (gradient accumulation of 4 batches under
a warmup from 0: the weights saved at steps 0 and 4 are identical on both healthy seeds); the dead-model
exception on ``bench/detection/run.py``'s dying-ReLU runs (every hidden gradient exactly zero).

``fade_out_factor`` (0, off, by default): a weight whose ratio fell below ``small_threshold`` after its
last ratio above it (within ``fade_out_steps`` saved steps of the mode) was already at most
``fade_out_factor`` x the resolution of its dtype (``numpy.finfo(dtype).eps``, 1.2e-7 for float32) is
passed over: its updates faded out, they did not stop. Why: a schedule that ends at 0 (PyTorch's
``CosineAnnealingLR`` with ``eta_min`` 0, Keras's ``CosineDecay``) shrinks the updates below what a float32
weight near 1 can represent (one unit in the last place is ``eps`` relative), so they round to nothing: on
Keras's ``CosineDecay`` to 0 (families benchmark, convbn_keras at batch 4) the ratios of a BatchNorm scale
fall 5e-6, 1e-6, 3e-7, 5e-8, then 0. A scheduler bug that zeroes the rate stops the weights after
full-size updates (9e-4, then 0, on the same family), and parameters the optimiser never sees never moved
(no ratio above the threshold): both still fire. So does a rate too low ever to move the weights visibly:
the fade-out needs a ratio above the bound within the same ``fade_out_steps`` (updates that shrank; a
LayerNorm weight under the families' ``lr_too_low`` moves by 2e-7 to 3e-7 of itself from the start). A
momentum optimiser whose rate a bug zeroed keeps moving the weights by its decaying velocity (0.9 a step
under SGD's momentum 0.9): that is a fade-out too, and the rule fires once it has ended.

``faded_lr_fraction`` (off by default; 1e-3 in the recommended set): where the trial saves a learning rate,
a small ratio over a window in which every saved rate stayed at or below this fraction of its peak is not
judged (:mod:`~tornasole.rules.builtin.faded_rates`, shared with UnchangedTensor). Why besides
``fade_out_factor``: a cosine's tail can fade more slowly than ``fade_out_steps`` saved steps, so the last
visible ratio lies behind them (families benchmark, induction_tf's cosine to 0 at batch 4: a LayerNorm
weight's ratio at 4e-5 of the peak rate was 0 after more than 16 saved steps within float32's resolution).
A large ratio is judged whatever the rate.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any

import numpy as np

from tornasole.modes import GLOBAL, TRAIN, ModeKeys
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.faded_rates import FADED_LR_FRACTION, FadedRates
from tornasole.rules.params import Param

__all__ = ["WeightUpdateRatio"]

#: Saved steps of another mode (a validation phase) the evaluator loads besides the compared ones.
EVAL_PHASE_ROOM = 16


class WeightUpdateRatio(FadedRates, BuiltinRule):
    """Fires when ||update|| / ||weights|| is above ``large_threshold`` or below ``small_threshold``.

    Examples
    --------
    >>> # invoke_rule(WeightUpdateRatio(trial, large_threshold="10", small_threshold="0.00000001"))
    """

    LIKELY_CAUSE = "{tensor} barely moves: learning rate too low, or the layer is not in the optimiser"
    SUGGESTED_FIX = "raise the learning rate, or check that the optimiser holds the layer's parameters"

    PARAMETERS = (
        Param(
            "num_steps", "int", None, "compare with the newest saved step <= s - num_steps (unset: previous)"
        ),
        Param("large_threshold", "float", "10.0", "ratio above this fires"),
        Param("small_threshold", "float", "0.00000001", "ratio below this fires"),
        Param("epsilon", "float", "0.000000001", "added to ||w|| to avoid dividing by zero"),
        Param(
            "small_window",
            "int",
            "1",
            "the weights must have stayed below small_threshold over this many saved steps of the mode "
            "(gradient accumulation updates only every few steps)",
        ),
        Param(
            "skip_frozen",
            "bool",
            "False",
            "pass over a weight saved with no gradient at a step that saved other gradients (a layer frozen "
            "on purpose, requires_grad=False)",
        ),
        Param(
            "fade_out_factor",
            "float",
            "0",
            "pass over a weight whose last ratio at or above small_threshold (within fade_out_steps saved "
            "steps) was at most this many times its dtype's resolution (numpy.finfo eps): updates that faded "
            "out at a schedule's tail, not a stop; 0 turns this off",
        ),
        Param(
            "fade_out_steps", "int", "16", "saved steps before the evaluated one that fade_out_factor reads"
        ),
        Param(
            "skip_idle_model",
            "bool",
            "False",
            "a window in which no weight of the model moved (no optimiser update: gradient accumulation, a "
            "skipped fp16 step, a warmup's first step at rate 0) fires only when the window before it was "
            "idle too",
        ),
        FADED_LR_FRACTION,
    )
    COLLECTIONS = (("weights", {"save_interval": "500"}),)

    def check_params(self) -> None:
        self.require_at_least(1, "num_steps", "small_window", "fade_out_steps")
        if self.fade_out_factor < 0:
            raise self.param_error("fade_out_factor", f"value {self.fade_out_factor} must be >= 0")
        self.check_faded_lr_fraction()

    def _previous(self, name: str, step: int, mode: ModeKeys) -> int | None:
        """Newest earlier global step of ``mode`` (``num_steps`` mode steps back, if set). Kept while one
        step is judged (:meth:`invoke_at_step` starts afresh: a live trial's steps can still arrive):
        ``skip_idle_model`` and the judging itself ask for the same windows."""
        memo = self.__dict__.setdefault("_previous_memo", {})
        key = (name, step, mode)
        if key not in memo:
            memo[key] = self._previous_of(name, step, mode)
        return memo[key]

    def _previous_of(self, name: str, step: int, mode: ModeKeys) -> int | None:
        steps = self.same_mode_steps(name, step, mode)
        if not steps or steps[-1] != step:
            return None
        if self.num_steps is None:
            return steps[-2] if len(steps) > 1 else None
        if mode == GLOBAL:
            limit = step - self.num_steps
        else:
            limit = self.base_trial.mode_step(step) - self.num_steps
            steps = [self.base_trial.mode_step(s) for s in steps]
        i = bisect.bisect_right(steps, limit)
        if not i:
            return None
        return steps[i - 1] if mode == GLOBAL else self.base_trial.global_step(mode, steps[i - 1])

    def leading_steps(self) -> int:
        return self.faded_leading_steps()

    def history_steps(self) -> int | None:
        # the previous TRAIN step may lie behind a validation phase: leave room for one (one per window step)
        back = max(1 if self.num_steps is None else self.num_steps, self.small_window)
        if self.skip_idle_model:
            back = max(back, 2 if self.num_steps is None else 2 * self.num_steps)
        if self.fade_out_factor > 0:
            back = max(back, self.fade_out_steps + 1)
        # fade_out_steps saved TRAIN steps may span several validation phases: room for a few
        fade_windows = 4 if self.fade_out_factor > 0 else 1
        windows = max(self.small_window, 2 if self.skip_idle_model else 1, fade_windows)
        return back + EVAL_PHASE_ROOM * windows

    def _small_over_window(self, name: str, step: int, mode: ModeKeys) -> bool:
        """``small_window`` > 1: the weights moved less than ``small_threshold`` across that many saved steps
        of the mode (False while fewer have been saved: not judged yet)."""
        steps = self.same_mode_steps(name, step, mode)
        if len(steps) <= self.small_window or steps[-1] != step:
            return False
        w, w0 = self.value(name, step), self.value(name, steps[-1 - self.small_window])
        if w is None or w0 is None:
            return False
        ratio = float(np.linalg.norm((w - w0).ravel()) / (np.linalg.norm(w0.ravel()) + self.epsilon))
        return ratio < self.small_threshold

    def _faded_out(self, name: str, step: int, mode: ModeKeys) -> float | None:
        """With ``fade_out_factor``: the ratio between consecutive saved steps of the mode, read back from
        ``step`` over ``fade_out_steps`` steps, was last at or above ``small_threshold`` at a value no larger
        than ``fade_out_factor`` x the weight's dtype resolution, after a ratio above that bound in the same
        steps: that last ratio then (the updates were visible, then faded out); None when it was larger (a
        stop), no ratio there rose above the bound (a rate too low ever to move the weights visibly), the
        weight is not floating point, or no ratio there reached the threshold (it never moved there)."""
        steps = self.same_mode_steps(name, step, mode)[-(self.fade_out_steps + 1) :]
        values = [self.value(name, s) for s in steps]
        if len(values) < 2 or any(v is None for v in values):
            return None
        if not np.issubdtype(np.asarray(values[-1]).dtype, np.floating):
            return None
        bound = self.fade_out_factor * float(np.finfo(np.asarray(values[-1]).dtype).eps)
        ratios = []
        for w0, w in zip(values, values[1:]):
            w0_64, w_64 = np.asarray(w0, np.float64).ravel(), np.asarray(w, np.float64).ravel()
            if w0_64.shape != w_64.shape:
                return None
            ratios.append(float(np.linalg.norm(w_64 - w0_64) / (np.linalg.norm(w0_64) + self.epsilon)))
        if not all(np.isfinite(ratios)) or max(ratios) <= bound:
            return None  # never above the resolution there: a rate too low to move the weights, not a fade
        last = next((r for r in reversed(ratios) if r >= self.small_threshold), None)
        return last if last is not None and last <= bound else None

    def advice(self) -> tuple[str, str] | None:
        """Large updates and updates that vanish have opposite causes: say which one fired."""
        value, tensor = self._values.get("value"), self._values.get("tensor") or "the layer"
        if isinstance(value, (int, float)) and value > self.large_threshold:
            return (
                f"the updates of {tensor} are large relative to its weights: learning rate too high",
                "lower the learning rate 10x or add a warmup",
            )
        return super().advice()

    def _idle(self, names: list[str], step: int, mode: ModeKeys) -> bool | None:
        """Whether no weight in ``names`` moved between ``step`` and each one's previous step of the mode
        (every one equal, two tensors at least: one tensor alone cannot tell a window without an update
        from a layer that stopped); None when fewer than two have a previous step to compare with."""
        compared = 0
        for _name, _prev, w, w0 in self._windows(names, step, mode):
            if np.shape(w) != np.shape(w0) or not np.array_equal(w, w0):
                return False
            compared += 1
        return True if compared >= 2 else None

    def _windows(self, names: list[str], step: int, mode: ModeKeys) -> Iterator[tuple[str, int, Any, Any]]:
        """``(name, previous step, weights at step, weights at the previous step)`` for each of ``names``
        saved at an earlier step of the mode, both values readable."""
        for name in names:
            prev = self._previous(name, step, mode)
            if prev is None:
                continue
            w, w0 = self.value(name, step), self.value(name, prev)
            if w is not None and w0 is not None:
                yield name, prev, w, w0

    def _idle_window_alone(self, names: list[str], step: int, mode: ModeKeys) -> bool:
        """``skip_idle_model``: the window ending at ``step`` made no update anywhere, and the window before
        it did or there is none (a window without an update, not a stop)."""
        if self._idle(names, step, mode) is not True or self._gradients_all_zero(names, step):
            return False
        earlier = {self._previous(name, step, mode) for name in names} - {None}
        if len(earlier) != 1:
            return False  # weights saved at different steps: judged as without the option
        (prev,) = earlier
        judged = set(names)
        before = [n for n in self.names_at(prev, ["weights"]) if n in judged]
        return self._idle(before, prev, mode) is not True

    def _gradients_all_zero(self, names: list[str], step: int) -> bool:
        """Every weight of ``names`` (two at least) has a gradient saved at ``step``, and every one is exactly
        zero: a model that cannot move (every ReLU dead), judged at once, not a window without an update
        (accumulated, skipped or warmed-up-from-0 updates still have their gradients)."""
        found = self.gradients_of(step, names)
        if len(names) < 2 or len(found) < len(names):
            return False
        for grad in found.values():
            value = self.value(grad, step)
            if value is None or np.any(np.asarray(value) != 0):  # NaN != 0: not a dead model
                return False
        return True

    def invoke_at_step(self, step: int) -> bool:
        self.__dict__["_previous_memo"] = {}
        mode = self.step_mode(step)
        if mode not in (TRAIN, GLOBAL):
            return False  # no update happens in EVAL/PREDICT
        names = self.names_at(step, ["weights"])
        frozen = self.frozen_on_purpose(step, names) if self.skip_frozen else set()
        if self.skip_idle_model and self._idle_window_alone(
            [n for n in names if n not in frozen], step, mode
        ):
            return False
        for name, prev, w, w0 in self._windows([n for n in names if n not in frozen], step, mode):
            ratio = float(np.linalg.norm((w - w0).ravel()) / (np.linalg.norm(w0.ravel()) + self.epsilon))
            small = ratio < self.small_threshold and (
                self.small_window == 1 or self._small_over_window(name, step, mode)
            )
            if small and self.fade_out_factor > 0 and self._faded_out(name, step, mode) is not None:
                small = False
            if small and self.rates_faded(prev, step):
                small = False
            if ratio > self.large_threshold or small:
                bound = (
                    f"> large_threshold {self.fmt(self.large_threshold)}"
                    if ratio > self.large_threshold
                    else f"< small_threshold {self.fmt(self.small_threshold)}"
                )
                self.report_issue(
                    f"{name} ({mode.name}): ||w_{step} - w_{prev}|| / ||w_{prev}|| = {self.fmt(ratio)} "
                    f"{bound}",
                    tensor=name,
                    value=ratio,
                    previous_step=prev,
                    threshold=self.large_threshold if ratio > self.large_threshold else self.small_threshold,
                )
                return True
        return False

"""UnchangedTensor: a tensor stopped changing (frozen weights, stuck outputs).

Choices: per tensor, the last ``num_steps`` saved steps up to and including the
evaluated one are taken; with fewer than ``num_steps`` nothing is judged. The
rule fires when every consecutive pair is ``numpy.allclose(rtol, atol,
equal_nan)`` (so the first step where it can fire is the ``num_steps``-th
saved step of an unchanged tensor). One of ``collection_names``/``tensor_regex``
is required.

Modes: the steps compared are the saved steps of the evaluated step's own mode
(TRAIN with TRAIN; a trial without modes is GLOBAL), so a validation phase
between two training steps is never part of the window. At EVAL and PREDICT
steps the ``weights`` and ``biases`` collections are not judged: parameters do
not change outside training, so "unchanged" there is the expected state, not
a frozen layer.

``fade_out_factor`` (off by default): a tensor whose last change before the window (within
``fade_out_steps`` saved steps) was already within ``fade_out_factor`` x the allclose tolerance is passed
over: its updates faded out, they did not stop. Why: at the tail of a cosine schedule the learning rate is a
fraction of a percent of its peak and a LayerNorm weight's updates shrink until they fall inside the
tolerance: a healthy end (families benchmark, softmax family). A learning rate zeroed by a bug stops a
tensor after a full-size update, and parameters the optimiser never sees never moved: both still fire. No
learning rate needs to be saved.

``faded_lr_fraction`` (off by default; 1e-3 in the recommended ``UnchangedWeights``): where the trial
saves a learning rate (``lr/<group>``, :func:`tornasole.rules.builtin.series.learning_rate_names`; both
hooks save it), a window over which every saved rate stayed at or below this fraction of its peak so far
is not judged: the schedule, not a fault, took the updates to ~0. Why 1e-3: an update is ``lr x g`` (SGD)
or ``lr x m / sqrt(v)`` (Adam, whose normalised step is at most about 1 per element), and a healthy peak
rate is chosen so that a step moves a weight by well under its own size, about 1e-3 to 1e-2 of it
(Adam's default 1e-3 on weights of order 1). A thousandth of that is 1e-6 to 1e-5 of the weight per
step: at or below the allclose ``rtol`` of 1e-5, so the rule cannot tell such updates from none. A cosine
decay to 0 spends the last 2 % of its steps there (``(1 + cos(pi (1 - x))) / 2 <= 1e-3`` for
``x <= 0.02``): longer than ``fade_out_steps`` saved steps on a long run at a small batch.

A rate that did not decay there but was set to 0 is judged as before: the first saved value after its
last one above the fraction is 0 or below (a scheduler bug, a lambda that returns 0). A smooth schedule
reaches exactly 0 only at its end, from below the fraction when saved at least every 2 % of a cosine
run (a linear decay crosses a thousandth of its peak in its last 0.1 %, and is 0 at one saved step at
most). A window in which any saved rate was still above the fraction (parameters left out of the
optimiser under a live rate) is judged as before, and a trial that saves no rate is judged exactly as
without this parameter. The serverless evaluator loads the run's first 32 saved steps and the recent
window, so there the peak is the largest rate among those: a warmup longer than 32 saved steps can hide
the peak, which only makes a window look less faded (judged).

``skip_frozen`` (off by default): a tensor saved with no gradient at a step
that saved gradients of other layers is a layer frozen on purpose
(:meth:`BuiltinRule.frozen_on_purpose`); a layer whose parameters never reach
the optimiser still has a gradient, and still fires.
"""

from __future__ import annotations

import numpy as np

from tornasole.modes import EVAL, PREDICT, ModeKeys
from tornasole.rules.builtin.base import COLLECTION_NAMES, TENSOR_REGEX, BuiltinRule
from tornasole.rules.builtin.series import learning_rate_names
from tornasole.rules.params import Param

__all__ = ["UnchangedTensor"]

#: Saved steps from the run's start that the serverless evaluator loads for ``faded_lr_fraction``'s peak.
_PEAK_LEADING_STEPS = 32


class UnchangedTensor(BuiltinRule):
    """Fires when an inspected tensor is allclose over its last ``num_steps`` saved steps.

    Examples
    --------
    >>> # invoke_rule(UnchangedTensor(trial, collection_names="weights", num_steps="3"))
    """

    LIKELY_CAUSE = (
        "{tensor} did not change across steps: its parameters do not reach the optimiser, or the learning"
        " rate is 0"
    )
    SUGGESTED_FIX = (
        "pass every trainable parameter to the optimiser and check the scheduler; a layer frozen on "
        "purpose needs no alarm: set requires_grad=False or leave it out of the rule's collection"
    )

    PARAMETERS = (
        COLLECTION_NAMES,
        TENSOR_REGEX,
        Param("num_steps", "int", "3", "saved steps that must all be equal"),
        Param("rtol", "float", "1e-05", "numpy.allclose rtol"),
        Param("atol", "float", "1e-08", "numpy.allclose atol"),
        Param("equal_nan", "bool", "False", "numpy.allclose equal_nan"),
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
            "pass over a tensor whose last change before the window (within fade_out_steps saved steps) was "
            "at most this many times the allclose tolerance (rtol*||w|| + atol*sqrt(size)): updates that "
            "faded out at a schedule's tail, not a stop; 0 turns this off",
        ),
        Param("fade_out_steps", "int", "16", "saved steps before the window that fade_out_factor reads"),
        Param(
            "faded_lr_fraction",
            "float",
            "0",
            "where the trial saves a learning rate: do not judge a window over which every saved rate stayed "
            "at or below this fraction of its peak so far (a schedule decayed to ~0); 0 turns this off",
        ),
    )

    def check_params(self) -> None:
        self.require_selection()
        self.require_at_least(2, "num_steps")
        self.require_at_least(0, "faded_lr_fraction")
        if self.faded_lr_fraction >= 1:
            raise self.param_error("faded_lr_fraction", f"value {self.faded_lr_fraction} must be < 1")

    def _rates_faded(self, first: int, last: int) -> bool:
        """With ``faded_lr_fraction``: the trial saves at least one learning rate, and every one of them
        faded between global steps ``first`` and ``last`` (:meth:`_rate_faded`). False when no rate is
        saved."""
        key = (first, last)
        memo: dict[tuple[int, int], bool] = self.__dict__.setdefault("_faded_memo", {})
        if key not in memo:
            names = learning_rate_names(self)
            memo[key] = bool(names) and all(self._rate_faded(n, first, last) for n in names)
        return memo[key]

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

    def history_steps(self) -> int | None:
        return self.num_steps + (self.fade_out_steps if self.fade_out_factor > 0 else 0)

    def leading_steps(self) -> int:
        # the learning rate's peak: the first saved steps (a schedule's warmup) beside the recent window
        return _PEAK_LEADING_STEPS if self.faded_lr_fraction > 0 else 0

    def _faded_out(self, name: str, steps: list[int], mode: ModeKeys) -> dict | None:
        """With ``fade_out_factor``: the tensor's updates shrank to the tolerance rather than stopping. The
        last change between consecutive saved steps (L2 norm of the difference) that is not allclose, in the
        ``fade_out_steps`` saved steps before ``steps[0]``, is at most ``fade_out_factor`` x the tolerance
        ``rtol * ||w|| + atol * sqrt(size)``: ``{"last_change", "tolerance"}`` then; None when it is larger
        (a stop) or there is none (the tensor never moved there)."""
        earlier = self.same_mode_steps(name, steps[0], mode)[-(self.fade_out_steps + 1) :]
        values = [self.value(name, s) for s in earlier]
        if any(v is None for v in values):
            return None
        for a, b in reversed(list(zip(values, values[1:]))):
            if a.shape != b.shape:
                return None
            if np.allclose(a, b, rtol=self.rtol, atol=self.atol, equal_nan=self.equal_nan):
                continue
            diff = np.asarray(b, np.float64) - np.asarray(a, np.float64)
            change = float(np.linalg.norm(diff))
            tolerance = self.rtol * float(np.linalg.norm(np.asarray(b, np.float64))) + self.atol * b.size**0.5
            if np.isfinite(change) and change <= self.fade_out_factor * tolerance:
                return {"last_change": change, "tolerance": tolerance}
            return None
        return None

    def _parameters(self) -> set[str]:
        names: set[str] = set()
        for coll in ("weights", "biases"):
            try:
                names.update(self.base_trial.tensor_names(collection=coll))
            except (KeyError, ValueError):
                continue
        return names

    def invoke_at_step(self, step: int) -> bool:
        mode = self.step_mode(step)
        skip = self._parameters() if mode in (EVAL, PREDICT) else set()
        names = self.selected(step)
        if self.skip_frozen:
            skip |= self.frozen_on_purpose(step, names)
        for name in names:
            if name in skip:
                continue
            steps = self.same_mode_steps(name, step, mode)[-self.num_steps :]
            if len(steps) < self.num_steps or steps[-1] != step:
                continue
            values = [self.value(name, s) for s in steps]
            if any(v is None for v in values):
                continue
            if all(
                a.shape == b.shape
                and np.allclose(a, b, rtol=self.rtol, atol=self.atol, equal_nan=self.equal_nan)
                for a, b in zip(values, values[1:])
            ):
                if self.fade_out_factor > 0 and self._faded_out(name, steps, mode) is not None:
                    continue
                if self.faded_lr_fraction > 0 and self._rates_faded(steps[0], steps[-1]):
                    continue
                self.report_issue(
                    f"{name} ({mode.name}) allclose (rtol {self.fmt(self.rtol)}, atol {self.fmt(self.atol)}) "
                    f"over "
                    f"steps {steps[0]}..{steps[-1]} ({self.num_steps} saved steps)",
                    tensor=name,
                    steps=steps,
                )
                return True
        return False

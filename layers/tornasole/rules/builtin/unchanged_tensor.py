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
saves a learning rate, a window over which every saved rate stayed at or below this fraction of its peak is
not judged: the schedule, not a fault, took the updates to ~0 (:mod:`~tornasole.rules.builtin.faded_rates`,
shared with WeightUpdateRatio, says why 1e-3 and what is still judged).

``fade_out_drift`` (off by default; on in the recommended ``UnchangedWeights``), with ``fade_out_factor``: a
tensor whose every change between consecutive saved steps in the ``fade_out_steps`` before the window was
within the tolerance, but which moved beyond it over those steps (their first and last values not
allclose), is passed over: it moves too slowly per saved step to see, it did not stop. Why: Adam's step is
``lr x m / sqrt(v)``, and on a noisy gradient ``|m| / sqrt(v)`` is well below 1, so near a schedule's end a
LayerNorm weight can move by a tenth to a third of the tolerance per saved step for hundreds of steps while
the rate is still a few thousandths of its peak (families benchmark, induction_tf's cosine to 0 at batch 4:
``fade_out_steps`` of such changes, then UnchangedWeights fired at 2.3e-3 of the peak on both seeds). A
tensor the optimiser never sees has the same value across the whole look-back, and one that stopped after
a visible update is judged as before (the last change above the tolerance is what ``fade_out_factor``
reads). A momentum optimiser whose rate a bug set to 0 keeps moving the weights by a decaying velocity:
where the trial saves its learning rate and a saved rate is 0 in the look-back or window, that movement
is not a drift (regression_keras's ``scheduler_zeroes_lr``: without this check UnchangedWeights fired 10 to
14 steps later there).

``skip_frozen`` (off by default): a tensor saved with no gradient at a step
that saved gradients of other layers is a layer frozen on purpose
(:meth:`BuiltinRule.frozen_on_purpose`); a layer whose parameters never reach
the optimiser still has a gradient, and still fires.
"""

from __future__ import annotations

import numpy as np

from tornasole.modes import EVAL, PREDICT, ModeKeys
from tornasole.rules.builtin.base import COLLECTION_NAMES, TENSOR_REGEX, BuiltinRule
from tornasole.rules.builtin.faded_rates import FADED_LR_FRACTION, FadedRates
from tornasole.rules.params import Param

__all__ = ["UnchangedTensor"]


class UnchangedTensor(FadedRates, BuiltinRule):
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
            "fade_out_drift",
            "bool",
            "False",
            "with fade_out_factor: also pass over a tensor whose every change in the fade_out_steps saved "
            "steps before the window was within the tolerance while it moved beyond it over them (too slow "
            "to see per step, not stopped)",
        ),
        FADED_LR_FRACTION,
    )

    def check_params(self) -> None:
        self.require_selection()
        self.require_at_least(2, "num_steps")
        self.check_faded_lr_fraction()

    def history_steps(self) -> int | None:
        return self.num_steps + (self.fade_out_steps if self.fade_out_factor > 0 else 0)

    def leading_steps(self) -> int:
        return self.faded_leading_steps()

    def _faded_out(self, name: str, steps: list[int], mode: ModeKeys) -> dict | None:
        """With ``fade_out_factor``: the tensor's updates shrank to the tolerance rather than stopping. The
        last change between consecutive saved steps (L2 norm of the difference) that is not allclose, in the
        ``fade_out_steps`` saved steps before ``steps[0]``, is at most ``fade_out_factor`` x the tolerance
        ``rtol * ||w|| + atol * sqrt(size)``: ``{"last_change", "tolerance"}`` then; None when it is larger
        (a stop) or there is none (the tensor never moved there). With ``fade_out_drift``, a tensor with no
        change above the tolerance there whose first and last values there are not allclose drifted:
        ``{"drift", "over_steps"}``, unless a saved learning rate is 0 there (a momentum's velocity decaying
        after the rate was zeroed, :meth:`rate_zeroed`)."""
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
        if self.fade_out_drift and len(values) > 2:  # every change there within the tolerance: did it drift?
            first, last = values[0], values[-1]
            if first.shape == last.shape and not np.allclose(
                first, last, rtol=self.rtol, atol=self.atol, equal_nan=self.equal_nan
            ):
                drift = float(np.linalg.norm(np.asarray(last, np.float64) - np.asarray(first, np.float64)))
                if np.isfinite(drift) and not self.rate_zeroed(earlier[0], steps[-1]):
                    return {"drift": drift, "over_steps": len(values) - 1}
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
                if self.rates_faded(steps[0], steps[-1]):
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

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

``skip_frozen`` (off by default): a tensor saved with no gradient at a step
that saved gradients of other layers is a layer frozen on purpose
(:meth:`BuiltinRule.frozen_on_purpose`); a layer whose parameters never reach
the optimiser still has a gradient, and still fires.
"""

from __future__ import annotations

import numpy as np

from tornasole.modes import EVAL, PREDICT, ModeKeys
from tornasole.rules.builtin.base import COLLECTION_NAMES, TENSOR_REGEX, BuiltinRule
from tornasole.rules.params import Param

__all__ = ["UnchangedTensor"]


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
    )

    def check_params(self) -> None:
        self.require_selection()
        self.require_at_least(2, "num_steps")

    def history_steps(self) -> int | None:
        return self.num_steps + (self.fade_out_steps if self.fade_out_factor > 0 else 0)

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
                self.report_issue(
                    f"{name} ({mode.name}) allclose (rtol {self.fmt(self.rtol)}, atol {self.fmt(self.atol)}) "
                    f"over "
                    f"steps {steps[0]}..{steps[-1]} ({self.num_steps} saved steps)",
                    tensor=name,
                    steps=steps,
                )
                return True
        return False

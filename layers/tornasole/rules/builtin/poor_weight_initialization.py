"""PoorWeightInitialization: signs of a bad initialisation in the first steps.

Choices: the rule reads training data, so it is evaluated at TRAIN steps (GLOBAL
steps for a trial saved without modes); "the first ``steps`` steps" are the
first ``steps`` saved steps **of that mode that hold any of its tensors**
(activation inputs, gradients, losses): a validation phase neither uses them up
nor is judged, and neither does a step that saved only other tensors (an
epoch-end metric, a collection on its own save interval). At such a step the
rule fires when any of:

1. activation inputs (``activation_inputs_regex``) of at least two layers have
   variances whose max/min ratio exceeds ``threshold`` (layers on very
   different scales); each variance is over the whole tensor (batch and units);
   layers whose inputs are all exactly 0 carry no scale and are left out;
2. the 5th-95th percentile spread of all gradient values of the step is below
   ``distribution_range`` (gradients collapsed to one value);
3. the training loss does not fall within ``patience`` steps: the mean of the
   last ``patience`` saved training losses is not lower than the mean of the
   ``patience`` before them. Means, not single batch losses, because one batch's
   loss is noisy enough to "rise" on a healthy run; checked once ``2 * patience``
   losses exist (so it needs ``steps >= 2 * patience``).

The default ``activation_inputs_regex`` (SageMaker's ``.*relu_input``) only
sees ReLU networks; pass e.g. ``.*(relu|tanh|sigmoid)_input`` for others.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tornasole.modes import GLOBAL, TRAIN
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.losses import loss_names
from tornasole.rules.params import Param

__all__ = ["PoorWeightInitialization"]


class PoorWeightInitialization(BuiltinRule):
    """Fires on badly scaled activations, collapsed gradients or a non-decreasing loss early on.

    Examples
    --------
    >>> # invoke_rule(PoorWeightInitialization(trial, steps="10"))
    """

    LIKELY_CAUSE = "the weights are badly scaled for the activations (they vanish or explode across layers)"
    SUGGESTED_FIX = (
        "use He (ReLU) or Xavier/Glorot (tanh, sigmoid) initialisation, or add normalisation layers"
    )

    PARAMETERS = (
        Param("activation_inputs_regex", "regex", ".*relu_input", "activation inputs (re.match)"),
        Param("threshold", "float", "10.0", "max/min variance ratio across layers above this fires"),
        Param("distribution_range", "float", "0.001", "5th-95th percentile gradient spread below this fires"),
        Param("patience", "int", "5", "TRAIN steps: mean loss of the last patience vs the patience before"),
        Param("steps", "int", "10", "number of first saved TRAIN steps that are judged"),
    )
    COLLECTIONS = (("relu_input", {"include_regex": ".*relu_input", "save_interval": "500"}),)

    def __init__(self, base_trial: Any, other_trials: Any = None, **params: Any) -> None:
        self._holds: dict[int, bool] = {}  # step -> it saved some tensor this rule reads
        self._last_judged: int | None = None  # the global step of the ``steps``-th such TRAIN step
        super().__init__(base_trial, other_trials, **params)

    def check_params(self) -> None:
        self.require_at_least(1, "patience")
        self.require_at_least(0, "steps")

    def history_steps(self) -> int | None:
        return None  # the first `steps` TRAIN steps may be interleaved with validation phases

    def leading_steps(self) -> int:
        # the judged first ``steps`` TRAIN steps (and the patience before them), EVAL steps interleaved
        return 4 * (self.steps + self.patience)

    def _own_tensors_at(self, step: int) -> bool:
        """Whether ``step`` saved any tensor this rule reads (remembered: asked again at later steps)."""
        if step not in self._holds:
            losses = set(loss_names(self))
            names = self.base_trial.tensor_names(step=step)
            self._holds[step] = bool(
                losses.intersection(names) or self.names_at(step, ["gradients"], self.activation_inputs_regex)
            )
        return self._holds[step]

    def _train_index(self, step: int) -> int | None:
        """Index of ``step`` among its mode's saved steps that hold the rule's tensors (TRAIN/GLOBAL only);
        counting stops at ``steps`` (``steps`` then means "later")."""
        if self._last_judged is not None and step > self._last_judged:
            return self.steps  # past the first ``steps``: no more reads at each of a long run's steps
        mode = self.step_mode(step)
        if mode not in (TRAIN, GLOBAL) or not self._own_tensors_at(step):
            return None
        trial = self.base_trial
        if mode == GLOBAL:
            earlier = (s for s in trial.steps() if s < step)
        else:
            ms = trial.mode_step(step)
            earlier = (trial.global_step(mode, m) for m in trial.steps(mode=mode) if m < ms)
        i = 0
        for s in earlier:  # in order, and only until ``steps`` are found: O(steps) at late steps
            if i >= self.steps:
                break
            if s is not None and self._own_tensors_at(s):
                i += 1
                if i == self.steps:
                    self._last_judged = s
        return i

    def invoke_at_step(self, step: int) -> bool:
        i = self._train_index(step)
        if i is None or i >= self.steps:
            return False
        return self._variances(step) or self._gradients(step) or self._loss(step)

    def _variances(self, step: int) -> bool:
        var = {}
        for name in self.names_at(step, regex=self.activation_inputs_regex):
            v = self.value(name, step)
            if v is not None and v.size and np.any(v):
                var[name] = float(np.var(v.astype(np.float64)))
        if len(var) < 2:
            return False
        hi, lo = max(var, key=var.get), min(var, key=var.get)
        ratio = var[hi] / var[lo] if var[lo] > 0 else float("inf")
        if ratio > self.threshold:
            self.report_issue(
                f"variance of {hi}={self.fmt(var[hi])} is {self.fmt(ratio)}x that of "
                f"{lo}={self.fmt(var[lo])} (> threshold {self.fmt(self.threshold)})",
                tensor=hi,
                value=ratio,
                threshold=self.threshold,
            )
            return True
        return False

    def _gradients(self, step: int) -> bool:
        parts = [self.value(n, step) for n in self.names_at(step, ["gradients"])]
        parts = [p.ravel() for p in parts if p is not None and p.size]
        if not parts:
            return False
        p5, p95 = np.percentile(np.concatenate(parts), [5, 95])
        spread = float(p95 - p5)
        if spread < self.distribution_range:
            self.report_issue(
                f"gradient 5th-95th percentile spread {self.fmt(spread)} over {len(parts)} gradient "
                f"tensor(s) < distribution_range {self.fmt(self.distribution_range)}",
                value=spread,
                threshold=self.distribution_range,
            )
            return True
        return False

    def _loss(self, step: int) -> bool:
        mode = self.step_mode(step)
        for name in loss_names(self):
            steps = self.same_mode_steps(name, step, mode)
            if not steps or steps[-1] != step or len(steps) < 2 * self.patience:
                continue
            recent = [self.scalar(name, s) for s in steps[-self.patience :]]
            before = [self.scalar(name, s) for s in steps[-2 * self.patience : -self.patience]]
            if any(v is None for v in recent + before):
                continue
            now, then = float(np.mean(recent)), float(np.mean(before))
            if not now < then:
                self.report_issue(
                    f"{name} ({mode.name}): mean of steps {steps[-self.patience]}..{step} = {self.fmt(now)} "
                    f"not below mean of the {self.patience} steps before = {self.fmt(then)}",
                    tensor=name,
                    value=now,
                    previous=then,
                    threshold=then,
                )
                return True
        return False

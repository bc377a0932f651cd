"""PoorWeightInitialization: signs of a bad initialisation in the first steps.

Choices: only the first ``steps`` saved steps of the trial are judged (later
steps return False), counted among the steps the trial holds: the serverless
evaluator, which loads ``history_steps()`` (= ``steps``) earlier steps, agrees.
At such a step the rule fires when any of:

1. activation inputs (``activation_inputs_regex``) of at least two layers have
   variances whose max/min ratio exceeds ``threshold`` (layers on very
   different scales);
2. the 5th-95th percentile spread of all gradient values of the step is below
   ``distribution_range`` (gradients collapsed to one value);
3. the loss (``losses`` collection) at this step is not lower than the loss
   ``patience`` saved steps earlier (no learning within ``patience``).
"""

from __future__ import annotations

import bisect

import numpy as np

from tornasole.rules.generic.base import BuiltinRule
from tornasole.rules.generic.losses import loss_names
from tornasole.rules.params import Param

__all__ = ["PoorWeightInitialization"]


class PoorWeightInitialization(BuiltinRule):
    """Fires on badly scaled activations, collapsed gradients or a non-decreasing loss early on.

    Examples
    --------
    >>> # invoke_rule(PoorWeightInitialization(trial, steps="10"))
    """

    PARAMETERS = (
        Param("activation_inputs_regex", "regex", ".*relu_input", "activation inputs (re.match)"),
        Param("threshold", "float", "10.0", "max/min variance ratio across layers above this fires"),
        Param("distribution_range", "float", "0.001", "5th-95th percentile gradient spread below this fires"),
        Param("patience", "int", "5", "saved steps within which the loss must decrease"),
        Param("steps", "int", "10", "number of first saved steps that are judged"),
    )
    COLLECTIONS = (("relu_input", {"include_regex": ".*relu_input", "save_interval": "500"}),)

    def history_steps(self) -> int | None:
        return self.steps

    def invoke_at_step(self, step: int) -> bool:
        all_steps = self.base_trial.steps()
        if bisect.bisect_left(all_steps, step) >= self.steps:
            return False
        return self._variances(step) or self._gradients(step) or self._loss(step)

    def _variances(self, step: int) -> bool:
        var = {}
        for name in self.names_at(step, regex=self.activation_inputs_regex):
            v = self.value(name, step)
            if v is not None and v.size:
                var[name] = float(np.var(v))
        if len(var) < 2:
            return False
        hi, lo = max(var, key=var.get), min(var, key=var.get)
        ratio = var[hi] / var[lo] if var[lo] > 0 else float("inf")
        if ratio > self.threshold:
            self.report_issue(
                f"variance of {hi}={self.fmt(var[hi])} is {self.fmt(ratio)}x that of "
                f"{lo}={self.fmt(var[lo])} (> threshold {self.fmt(self.threshold)})",
                value=ratio,
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
                f"gradient 5th-95th percentile spread {self.fmt(spread)} < distribution_range "
                f"{self.fmt(self.distribution_range)}",
                value=spread,
            )
            return True
        return False

    def _loss(self, step: int) -> bool:
        for name in loss_names(self):
            steps = [s for s in self.base_trial.tensor(name).steps() if s <= step]
            if not steps or steps[-1] != step or len(steps) <= self.patience:
                continue
            prev = steps[-1 - self.patience]
            now, before = self.scalar(name, step), self.scalar(name, prev)
            if now is not None and before is not None and now >= before:
                self.report_issue(
                    f"{name}={self.fmt(now)} not below {self.fmt(before)} of step {prev} "
                    f"({self.patience} saved steps earlier)",
                    tensor=name,
                    value=now,
                )
                return True
        return False

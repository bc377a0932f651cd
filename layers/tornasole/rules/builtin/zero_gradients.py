"""ZeroGradients: most gradient entries are exactly zero, and the model is not converging.

AUTOTRAINER's dying-ReLU criterion (ICSE'21): at a training step, at least
70% of all gradient entries (every layer's kernel and bias gradients counted
together) are exactly 0, and at a check the accuracy is not converging (the
best validation accuracy so far is below 0.6). DeadRelu reads activations
layer by layer; this rule reads the gradients that the dead units leave, the
whole network at once.

* Symptom: at a saved TRAIN step, the inspected tensors (``collection_names``,
  by default ``gradients``, and ``tensor_regex``) together hold at least
  ``threshold`` % exact zeros. Any such step since the start counts.
* Gate, as AUTOTRAINER gates every gradient problem: judged at validation
  passes (:class:`ValidationPasses`: whole passes of the accuracy tensors
  ``accuracy_regex``, read at their EVAL steps), at the pass whose count is at
  least ``min_passes`` and a multiple of ``check_every`` (AUTOTRAINER checks
  every third epoch), when the best pass so far is below ``max_accuracy``.
  Why: a net with small initial weights or a few dead layers can start with
  most of its gradients at zero and still learn; AUTOTRAINER calls it a
  problem only where the accuracy says the model is not getting anywhere.
  The rule therefore fires at a check, not at the step of the symptom.
* A trial with no accuracy saved in EVAL mode cannot be judged: every step is
  skipped (``TensorUnavailable``), never reported as NoIssuesFound.
"""

from __future__ import annotations

import numpy as np

from tornasole.modes import TRAIN
from tornasole.rules.builtin.base import COLLECTION_NAMES, TENSOR_REGEX, BuiltinRule
from tornasole.rules.builtin.validation_passes import ValidationPasses
from tornasole.rules.params import Param

__all__ = ["ZeroGradients"]


class ZeroGradients(ValidationPasses, BuiltinRule):
    """Fires when >= ``threshold`` % of all gradient entries were 0 and validation accuracy stays low.

    Examples
    --------
    >>> # invoke_rule(ZeroGradients(trial, threshold="70", max_accuracy="0.6"))
    """

    LIKELY_CAUSE = (
        "most gradient entries are exactly 0 while the accuracy stays low: dead ReLUs or a graph cut "
        "(detach, no_grad) before the loss"
    )
    SUGGESTED_FIX = (
        "lower the learning rate, use LeakyReLU, and check for .detach()/no_grad on the way to the loss"
    )

    PARAMETERS = (
        Param("collection_names", "str_list", "gradients", COLLECTION_NAMES.help),
        TENSOR_REGEX,
        Param("threshold", "float", "70", "% of exact zeros among all inspected entries (AUTOTRAINER: 70)"),
        Param("accuracy_regex", "regex", ".*acc(uracy)?$", "validation accuracy tensors (re.match, EVAL)"),
        Param("max_accuracy", "float", "0.6", "not converging: the best validation pass is below this"),
        Param("min_passes", "int", "3", "validation passes before the first check"),
        Param("check_every", "int", "3", "judge at pass counts that are multiples of this (AUTOTRAINER: 3)"),
    )
    COLLECTIONS = (("gradients", {"save_interval": "500"}), ("metrics", {"save_interval": "500"}))
    ACCURACY_PARAM = "accuracy_regex"

    def check_params(self) -> None:
        self.require_selection()
        if not 0 < self.threshold <= 100:
            raise self.param_error("threshold", f"value {self.threshold} must be in (0, 100]")
        self.require_at_least(1, "min_passes", "check_every")

    def history_steps(self) -> int | None:
        return None  # a symptom at any step since the start counts

    def _zero_share(self, step: int) -> tuple[float, int, int] | None:
        """``(zero %, entries, tensors)`` of the inspected tensors at saved TRAIN ``step`` (cached: a saved
        step's values never change); None when none was saved there."""
        cache = self.__dict__.setdefault("_zero_cache", {})
        if step not in cache:
            total = zeros = count = 0
            for name in self.selected(step):
                v = self.value(name, step)
                if v is None or v.size == 0:
                    continue
                total += v.size
                zeros += int(np.count_nonzero(v == 0))
                count += 1
            cache[step] = (100.0 * zeros / total, total, count) if total else None
        return cache[step]

    def _first_symptom(self, step: int) -> tuple[int, tuple[float, int, int]] | None:
        trial = self.base_trial
        for s in trial.steps():
            if s >= step:
                break
            if trial.mode(s) != TRAIN:
                continue
            share = self._zero_share(s)
            if share is not None and share[0] >= self.threshold:
                return s, share
        return None

    def invoke_at_step(self, step: int) -> bool:
        why = "ZeroGradients judges zero gradients only where the model is not converging"
        for name, means, _ in self._validation_passes(step, why):
            n, best = len(means), max(means)
            if n < self.min_passes or n % self.check_every or best >= self.max_accuracy:
                continue
            symptom = self._first_symptom(step)
            if symptom is None:
                return False
            at, (pct, entries, tensors) = symptom
            self.report_issue(
                f"at step {at} ({TRAIN.name} {self.base_trial.mode_step(at)}) {self.fmt(pct)}% of the "
                f"{entries} entries of {tensors} gradient tensor(s) were exactly 0 (>= threshold "
                f"{self.fmt(self.threshold)}%), and in {n} validation passes the best {name} is "
                f"{self.fmt(best)} < max_accuracy {self.fmt(self.max_accuracy)}: dead units, and the model "
                "is not converging",
                tensor=name,
                value=pct,
                threshold=self.threshold,
                best=best,
                symptom_step=at,
            )
            return True
        return False

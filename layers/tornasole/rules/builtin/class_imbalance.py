"""ClassImbalance: the training labels are badly imbalanced, or some classes are mostly mispredicted.

Choices:

* Labels and predictions are accumulated over every saved step <= the evaluated
  step **of the same mode** that the trial holds (the training labels'
  balance is a TRAIN matter; a validation set is judged on its own); only the
  past is looked at (``history_steps()`` is None: the serverless evaluator
  should load the whole history for it). The
  result depends only on the trial, not on which steps this rule object saw
  before, so the serverless evaluator (a fresh object per step) and
  ``invoke_rule`` agree; per-step counts are memoised.
* The first tensor matching ``labels_regex`` (and ``predictions_regex``) is used.
  With ``argmax=True`` predictions (and labels given as one-hot / probabilities,
  i.e. with more than one dimension) are reduced with argmax over the last axis.
* Nothing is checked until ``samples`` labels have been seen.
* Imbalance = largest / smallest count among the classes present in the labels.
* Misprediction of class i = fraction of samples labelled i predicted otherwise.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.params import Param

__all__ = ["ClassImbalance"]


class ClassImbalance(BuiltinRule):
    """Fires on class imbalance > ``threshold_imbalance`` or misprediction > ``threshold_misprediction``.

    Examples
    --------
    >>> # invoke_rule(ClassImbalance(trial, samples="100"))
    """

    LIKELY_CAUSE = "some classes are much rarer than others in the labels"
    SUGGESTED_FIX = "resample the data or weight the loss by inverse class frequency"

    PARAMETERS = (
        Param("threshold_imbalance", "float", "10", "largest/smallest class count above this fires"),
        Param("threshold_misprediction", "float", "0.7", "per-class misprediction fraction above this fires"),
        Param("samples", "int", "500", "labels to see before checking"),
        Param("argmax", "bool", "False", "take argmax over the last axis of predictions"),
        Param("labels_regex", "regex", ".*labels", "the labels tensor (re.match)"),
        Param("predictions_regex", "regex", ".*predictions", "the predictions tensor (re.match)"),
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._memo: dict[int, tuple[Counter, Counter, Counter]] = {}

    def _classes(self, v: np.ndarray | None, is_pred: bool) -> np.ndarray | None:
        if v is None:
            return None
        if v.ndim > 1 and (self.argmax or not is_pred):
            v = np.argmax(v, axis=-1)
        return np.asarray(v).ravel().astype(np.int64)

    def _counts(self, step: int, lname: str, pname: str | None) -> tuple[Counter, Counter, Counter]:
        if step not in self._memo:
            labels = self._classes(self.value(lname, step), False)
            preds = self._classes(self.value(pname, step), True) if pname else None
            total, wrong, seen = Counter(), Counter(), Counter()
            if labels is not None:
                total.update(labels.tolist())
                if preds is not None and preds.shape == labels.shape:
                    seen.update(labels.tolist())
                    wrong.update(labels[preds != labels].tolist())
            self._memo[step] = (total, wrong, seen)
        return self._memo[step]

    def invoke_at_step(self, step: int) -> bool:
        names = self.base_trial.tensor_names(step=step)
        lname = next((n for n in names if self.labels_regex.match(n)), None)
        if lname is None:
            return False
        pname = next((n for n in names if self.predictions_regex.match(n)), None)
        total, wrong, seen = Counter(), Counter(), Counter()
        for s in self.same_mode_steps(lname, step):
            t, w, c = self._counts(s, lname, pname)
            total.update(t)
            wrong.update(w)
            seen.update(c)
        if sum(total.values()) < self.samples:
            return False
        ratio = max(total.values()) / min(total.values())
        if ratio > self.threshold_imbalance:
            big, small = max(total, key=total.get), min(total, key=total.get)
            self.report_issue(
                f"{lname}: class {big} has {total[big]} labels, class {small} {total[small]}: imbalance "
                f"{self.fmt(ratio)} > threshold_imbalance {self.fmt(self.threshold_imbalance)}",
                tensor=lname,
                value=ratio,
                counts=dict(total),
                threshold=self.threshold_imbalance,
            )
            return True
        for cls in sorted(seen):
            frac = wrong[cls] / seen[cls]
            if frac > self.threshold_misprediction:
                self.report_issue(
                    f"{lname} vs {pname}: class {cls} mispredicted in {self.fmt(frac)} of {seen[cls]} "
                    f"samples > threshold_misprediction {self.fmt(self.threshold_misprediction)}",
                    tensor=lname,
                    value=frac,
                    cls=cls,
                    threshold=self.threshold_misprediction,
                )
                return True
        return False

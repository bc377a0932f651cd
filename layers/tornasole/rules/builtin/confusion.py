"""Confusion: the confusion matrix of the current step is not diagonal enough.

Choices: the matrix is built from the labels and predictions saved at the
evaluated step (one batch), ``m[p, l]`` counting samples of true class ``l``
predicted as ``p``; both ratios are normalised by the **column** (true class)
sum as SageMaker's guide defines them: the rule fires when ``m[i, i] / col_i <
min_diag`` or some ``m[j, i] / col_i > max_off_diag`` (j != i). Classes without
samples in the batch are not judged. Tensors are found by exact name
(``labels``/``predictions``) or, failing that, as the first tensor of
``labels_collection``/``predictions_collection``; predictions with more than
one dimension are argmax-ed over the last axis. ``category_no`` unset means
``max(labels, predictions) + 1``.
"""

from __future__ import annotations

import numpy as np

from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.params import Param

__all__ = ["Confusion"]


class Confusion(BuiltinRule):
    """Fires when a class's diagonal share < ``min_diag`` or an off-diagonal share > ``max_off_diag``.

    Examples
    --------
    >>> # invoke_rule(Confusion(trial, labels="labels", predictions="predictions"))
    """

    LIKELY_CAUSE = "the model confuses some classes (large off-diagonal entries of the confusion matrix)"
    SUGGESTED_FIX = "check the labels of the confused classes, add data for them or weight the loss"

    READS_EARLIER_STEPS = False
    PARAMETERS = (
        Param("category_no", "int", None, "number of classes (unset: inferred)"),
        Param("labels", "str", "labels", "labels tensor name"),
        Param("predictions", "str", "predictions", "predictions tensor name"),
        Param("labels_collection", "str", "labels", "collection holding labels"),
        Param("predictions_collection", "str", "predictions", "collection holding predictions"),
        Param("min_diag", "float", "0.9", "diagonal share below this fires"),
        Param("max_off_diag", "float", "0.1", "off-diagonal share above this fires"),
    )

    def _find(self, step: int, name: str, collection: str) -> str | None:
        names = self.base_trial.tensor_names(step=step)
        if name in names:
            return name
        found = self.names_at(step, [collection])
        return found[0] if found else None

    def invoke_at_step(self, step: int) -> bool:
        lname = self._find(step, self.labels, self.labels_collection)
        pname = self._find(step, self.predictions, self.predictions_collection)
        if lname is None or pname is None:
            return False
        labels, preds = self.value(lname, step), self.value(pname, step)
        if labels is None or preds is None:
            return False
        if preds.ndim > 1:
            preds = np.argmax(preds, axis=-1)
        if labels.ndim > 1:
            labels = np.argmax(labels, axis=-1)
        labels, preds = labels.ravel().astype(np.int64), preds.ravel().astype(np.int64)
        n = self.category_no or int(max(labels.max(initial=0), preds.max(initial=0))) + 1
        keep = (labels < n) & (preds < n) & (labels >= 0) & (preds >= 0)
        m = np.zeros((n, n), dtype=np.int64)
        np.add.at(m, (preds[keep], labels[keep]), 1)
        col = m.sum(axis=0)
        for i in range(n):
            if col[i] == 0:
                continue
            diag = m[i, i] / col[i]
            if diag < self.min_diag:
                self.report_issue(
                    f"{lname} vs {pname}: class {i}: {self.fmt(diag)} of its samples predicted right "
                    f"< min_diag {self.fmt(self.min_diag)}",
                    tensor=lname,
                    value=float(diag),
                    cls=i,
                    threshold=self.min_diag,
                )
                return True
            for j in range(n):
                if j != i and m[j, i] / col[i] > self.max_off_diag:
                    share = m[j, i] / col[i]
                    self.report_issue(
                        f"{lname} vs {pname}: class {i} predicted as {j} in {self.fmt(share)} of its samples "
                        f"> max_off_diag "
                        f"{self.fmt(self.max_off_diag)}",
                        tensor=lname,
                        value=float(share),
                        cls=i,
                        threshold=self.max_off_diag,
                    )
                    return True
        return False

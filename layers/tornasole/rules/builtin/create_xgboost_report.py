"""CreateXgboostReport (XGBoost): collects what a training report needs; never fires.

SageMaker's rule renders a notebook report. Here the rule gathers, at each
evaluated step, the metrics, feature importances and the label/prediction
counts it finds, into :attr:`CreateXgboostReport.report_data` (a JSON-ready
dict keyed by step) and returns False: it is a collector, not an alarm.
Rendering is left to the caller.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tornasole.rules.builtin.base import BuiltinRule

__all__ = ["CreateXgboostReport"]


class CreateXgboostReport(BuiltinRule):
    """Collects metrics / feature importance / labels+predictions per step into ``report_data``.

    Examples
    --------
    >>> # rule = CreateXgboostReport(trial); invoke_rule(rule); rule.report_data[10]["metrics"]
    """

    LIKELY_CAUSE = "the report was requested"
    SUGGESTED_FIX = "read the report in the rule's output"

    READS_EARLIER_STEPS = False
    PARAMETERS = ()
    COLLECTIONS = (
        ("metrics", {"save_interval": "5"}),
        ("feature_importance", {"save_interval": "5"}),
        ("hyperparameters", {"save_steps": "0"}),
        ("predictions", {"save_interval": "5"}),
        ("labels", {"save_interval": "5"}),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.report_data: dict[int, dict[str, Any]] = {}

    def _group(self, step: int, collection: str) -> dict[str, Any]:
        out = {}
        for name in self.names_at(step, [collection]):
            v = self.value(name, step)
            if v is not None and v.size:
                out[name] = float(np.mean(v)) if v.size == 1 or v.dtype.kind in "fiu" else v.tolist()
        return out

    def invoke_at_step(self, step: int) -> bool:
        entry = {c: self._group(step, c) for c in ("metrics", "feature_importance", "hyperparameters")}
        labels = [self.value(n, step) for n in self.names_at(step, ["labels"])]
        if labels and labels[0] is not None:
            vals, counts = np.unique(labels[0], return_counts=True)
            entry["label_counts"] = {str(k): int(c) for k, c in zip(vals.tolist(), counts.tolist())}
        self.report_data[step] = entry
        return False

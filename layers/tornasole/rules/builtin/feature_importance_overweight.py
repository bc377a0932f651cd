"""FeatureImportanceOverweight (XGBoost): a few features carry almost all the importance.

Choices: at a step, every tensor matching ``tensor_regex`` is one feature's
importance (smdebug's XGBoost hook saves ``feature_importance/weight/f0``...;
each value is summed to a scalar). The share of the ``nfeatures`` largest in
the total is compared with ``threshold``. With ``nfeatures`` or fewer features
the share is trivially 1, so nothing is judged.
"""

from __future__ import annotations

from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.params import Param

__all__ = ["FeatureImportanceOverweight"]


class FeatureImportanceOverweight(BuiltinRule):
    """Fires when the top ``nfeatures`` importances exceed ``threshold`` of the total.

    Examples
    --------
    >>> # invoke_rule(FeatureImportanceOverweight(trial, threshold="0.8", nfeatures="3"))
    """

    LIKELY_CAUSE = "a few features dominate the model (a feature may leak the label)"
    SUGGESTED_FIX = "check those features for leakage; drop or regularise them"

    READS_EARLIER_STEPS = False
    PARAMETERS = (
        Param("threshold", "float", "0.8", "share of the top features above which the rule fires"),
        Param("nfeatures", "int", "3", "number of top features"),
        Param(
            "tensor_regex", "regex", ".*feature_importance/weight", "feature importance tensors (re.match)"
        ),
    )
    COLLECTIONS = (("feature_importance", {"save_interval": "500"}),)

    def invoke_at_step(self, step: int) -> bool:
        imp = {}
        for name in self.names_at(step, regex=self.tensor_regex):
            v = self.value(name, step)
            if v is not None and v.size:
                imp[name] = float(v.sum())
        total = sum(imp.values())
        if len(imp) <= self.nfeatures or total <= 0:
            return False
        top = sorted(imp, key=imp.get, reverse=True)[: self.nfeatures]
        share = sum(imp[n] for n in top) / total
        if share > self.threshold:
            self.report_issue(
                f"top {self.nfeatures} features ({', '.join(top)}) hold {self.fmt(share)} of the importance "
                f"> threshold {self.fmt(self.threshold)}",
                value=share,
                features=top,
                threshold=self.threshold,
            )
            return True
        return False

"""AllZero: (almost) every value of a tensor is zero.

Choices: per tensor, the percentage of exact zeros is compared with
``threshold`` (fires when >= threshold, so the default 100 means "all zero");
tensors come from the union of ``collection_names`` and ``tensor_regex``, one
of which is required.
"""

from __future__ import annotations

import numpy as np

from tornasole.rules.builtin.base import COLLECTION_NAMES, TENSOR_REGEX, BuiltinRule
from tornasole.rules.params import Param

__all__ = ["AllZero"]


class AllZero(BuiltinRule):
    """Fires when >= ``threshold`` % of an inspected tensor's values are 0.

    Examples
    --------
    >>> # invoke_rule(AllZero(trial, tensor_regex=".*relu_output", threshold="100"))
    """

    LIKELY_CAUSE = "every value of {tensor} is 0: the tensor is not computed or not connected to the graph"
    SUGGESTED_FIX = "check that {tensor} is produced by the forward pass and saved after it is filled"

    READS_EARLIER_STEPS = False
    PARAMETERS = (
        COLLECTION_NAMES,
        TENSOR_REGEX,
        Param("threshold", "float", "100", "% of zeros at or above which the rule fires"),
    )

    def check_params(self) -> None:
        self.require_selection()

    def invoke_at_step(self, step: int) -> bool:
        for name in self.selected(step):
            v = self.value(name, step)
            if v is None or v.size == 0:
                continue
            pct = float(np.count_nonzero(v == 0) / v.size * 100.0)
            if pct >= self.threshold:
                self.report_issue(
                    f"{self.fmt(pct)}% of {name} is zero (>= threshold {self.fmt(self.threshold)}%)",
                    tensor=name,
                    value=pct,
                    threshold=self.threshold,
                )
                return True
        return False

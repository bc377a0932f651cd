"""TensorVariance: a tensor's variance is outside [min_threshold, max_threshold].

Choices: the variance is per tensor (``reduction_value(step, "variance")``:
the saved reduction if any, else computed from the values); at least one of
``collection_names``/``tensor_regex`` and at least one threshold are required
(otherwise the rule could never fire, which is almost surely a configuration
mistake, so it is reported when the rule is built).
"""

from __future__ import annotations

from tornasole.exceptions import TensorUnavailableForStep
from tornasole.rules.builtin.base import COLLECTION_NAMES, TENSOR_REGEX, BuiltinRule, as_float
from tornasole.rules.params import Param

__all__ = ["TensorVariance"]


class TensorVariance(BuiltinRule):
    """Fires when the variance of an inspected tensor is > ``max_threshold`` or < ``min_threshold``.

    Examples
    --------
    >>> # invoke_rule(TensorVariance(trial, collection_names="weights", max_threshold="10"))
    """

    LIKELY_CAUSE = "the variance of {tensor} is outside the expected range (values vanishing or exploding)"
    SUGGESTED_FIX = "check the initialisation and the learning rate; add normalisation layers"

    READS_EARLIER_STEPS = False
    PARAMETERS = (
        COLLECTION_NAMES,
        TENSOR_REGEX,
        Param("max_threshold", "float", None, "variance above this fires"),
        Param("min_threshold", "float", None, "variance below this fires"),
    )

    def check_params(self) -> None:
        self.require_selection()
        if self.max_threshold is None and self.min_threshold is None:
            raise self.param_error("max_threshold", "one of max_threshold or min_threshold is required")

    def invoke_at_step(self, step: int) -> bool:
        for name in self.selected(step):
            try:
                var = as_float(self.base_trial.tensor(name).reduction_value(step, "variance"))
            except TensorUnavailableForStep:
                continue
            if self.max_threshold is not None and var > self.max_threshold:
                bound = f"> max_threshold {self.fmt(self.max_threshold)}"
            elif self.min_threshold is not None and var < self.min_threshold:
                bound = f"< min_threshold {self.fmt(self.min_threshold)}"
            else:
                continue
            limit = self.max_threshold if bound.startswith(">") else self.min_threshold
            self.report_issue(
                f"variance({name})={self.fmt(var)} {bound}", tensor=name, value=var, threshold=limit
            )
            return True
        return False

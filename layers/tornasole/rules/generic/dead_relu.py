"""DeadRelu: too many ReLU units of a layer never activate.

Chosen reading, per ReLU output tensor (one layer): the first axis is the
batch; a unit (one position of the remaining axes) is *inactive* when it is
> 0 in fewer than ``threshold_inactivity`` % of the batch's samples; the layer
fires when more than ``threshold_layer`` % of its units are inactive. A 1-D
tensor is treated as one sample (each element a unit). Only the current step
is looked at: a unit dead for a whole batch is already informative.
"""

from __future__ import annotations

import numpy as np

from tornasole.rules.generic.base import BuiltinRule
from tornasole.rules.params import Param

__all__ = ["DeadRelu", "inactive_percent"]


def inactive_percent(active: np.ndarray, threshold_inactivity: float) -> float:
    """% of units active in fewer than ``threshold_inactivity`` % of samples (axis 0 = samples)."""
    if active.ndim < 2:
        active = active.reshape(1, -1)
    per_unit = active.reshape(active.shape[0], -1).mean(axis=0) * 100.0
    return float(np.mean(per_unit < threshold_inactivity) * 100.0)


class DeadRelu(BuiltinRule):
    """Fires when more than ``threshold_layer`` % of a layer's ReLUs are inactive.

    Examples
    --------
    >>> # invoke_rule(DeadRelu(trial, tensor_regex=".*relu_output"))
    """

    READS_EARLIER_STEPS = False
    PARAMETERS = (
        Param("tensor_regex", "regex", ".*relu_output", "ReLU output tensors (re.match)"),
        Param("threshold_inactivity", "float", "1.0", "% of samples below which a unit counts as dead"),
        Param("threshold_layer", "float", "50.0", "% of dead units above which the layer fires"),
    )
    COLLECTIONS = (("relu_output", {"include_regex": ".*relu_output", "save_interval": "500"}),)

    def invoke_at_step(self, step: int) -> bool:
        for name in self.names_at(step, regex=self.tensor_regex):
            v = self.value(name, step)
            if v is None or v.size == 0:
                continue
            pct = inactive_percent(v > 0, self.threshold_inactivity)
            if pct > self.threshold_layer:
                self.report_issue(
                    f"{self.fmt(pct)}% of ReLUs in {name} are dead (> threshold_layer "
                    f"{self.fmt(self.threshold_layer)}%)",
                    tensor=name,
                    value=pct,
                    threshold=self.threshold_layer,
                )
                return True
        return False

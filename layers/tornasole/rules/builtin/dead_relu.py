"""DeadRelu: too many ReLU units of a layer never activate.

Chosen reading, per ReLU output tensor (one layer): the first axis is the
batch; a unit (one position of the remaining axes) is *inactive* when it is
> 0 in fewer than ``threshold_inactivity`` % of the samples; the layer fires
when more than ``threshold_layer`` % of its units are inactive. A 1-D tensor is
treated as one sample (each element a unit).

Samples: "inactive in fewer than 1% of samples" means nothing for one sample
(a unit that is off for one input is not dead), so the samples of the evaluated
step are pooled with those of the newest earlier saved steps **of the same
mode** until there are at least ``min_samples`` (a batch of 32 or more needs
only the current step; batch-1 SGD pools 32 steps). Until enough samples exist
the layer is not judged.

``threshold_network`` (Tornasole's addition; unset = SageMaker's reading): the
layer fires only when, at the same step, the inactive units of every matching
ReLU tensor (each judged on its pooled samples) are also at least this % of all
their units together. Why: a net can start with one layer almost all dead (a
negative bias, an unlucky initialisation) and still learn through its few live
units and the other layers; a dying net has lost most of its units everywhere.
AUTOTRAINER's dying-ReLU criterion also counts the whole network (70% of all
gradient entries zero), not one layer.
"""

from __future__ import annotations

import numpy as np

from tornasole.rules.builtin.base import BuiltinRule
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

    LIKELY_CAUSE = (
        "ReLU units in {tensor} output 0 on every sample (dying ReLU): learning rate too high or negative"
        " biases"
    )
    SUGGESTED_FIX = "lower the learning rate 10x, use LeakyReLU/GELU, or He initialisation with biases at 0"

    PARAMETERS = (
        Param("tensor_regex", "regex", ".*relu_output", "ReLU output tensors (re.match)"),
        Param("threshold_inactivity", "float", "1.0", "% of samples below which a unit counts as dead"),
        Param("threshold_layer", "float", "50.0", "% of dead units above which the layer fires"),
        Param(
            "threshold_network",
            "float",
            None,
            "% of dead units over all matching layers also needed to fire (unset: off)",
        ),
        Param(
            "min_samples",
            "int",
            "32",
            "samples pooled from the newest saved steps of the mode before judging",
        ),
    )
    COLLECTIONS = (("relu_output", {"include_regex": ".*relu_output", "save_interval": "500"}),)

    def check_params(self) -> None:
        if self.threshold_network is not None and not 0 <= self.threshold_network <= 100:
            raise self.param_error(
                "threshold_network", f"value {self.threshold_network} must be within [0, 100]"
            )
        self.require_at_least(1, "min_samples")

    def history_steps(self) -> int | None:
        return self.min_samples

    def _samples(self, name: str, step: int) -> tuple[np.ndarray | None, list[int]]:
        """Activity (samples x units) pooled back from ``step`` until ``min_samples``; steps used."""
        pooled: list[np.ndarray] = []
        used: list[int] = []
        count = 0
        for s in reversed(self.same_mode_steps(name, step)):
            v = self.value(name, s)
            if v is None or v.size == 0:
                break
            v = v.reshape(1, -1) if v.ndim < 2 else v.reshape(v.shape[0], -1)
            if pooled and v.shape[1] != pooled[0].shape[1]:
                break  # the layer changed shape: do not mix
            pooled.append(v > 0)
            used.append(s)
            count += v.shape[0]
            if count >= self.min_samples:
                return np.concatenate(pooled), used
        return None, used

    def invoke_at_step(self, step: int) -> bool:
        judged = []  # (name, activity, steps used, % inactive) of the layers read so far
        for name in self.names_at(step, regex=self.tensor_regex):
            active, used = self._samples(name, step)
            if active is None:
                continue
            judged.append((name, active, used, inactive_percent(active, self.threshold_inactivity)))
            if self.threshold_network is None and judged[-1][3] > self.threshold_layer:
                return self._report(step, *judged[-1])  # SageMaker's reading: the first dead layer decides
        if self.threshold_network is None or not judged:
            return False
        units = sum(a.shape[1] for _, a, _, _ in judged)
        network = sum(pct * a.shape[1] for _, a, _, pct in judged) / units
        dead_layers = [j for j in judged if j[3] > self.threshold_layer]
        if not dead_layers or network < self.threshold_network:
            return False  # no dead layer, or one layer is dead and the network as a whole is not
        whole = (
            f"; {self.fmt(network)}% of the {len(judged)} layers' units together "
            f"(>= threshold_network {self.fmt(self.threshold_network)}%)"
        )
        return self._report(step, *dead_layers[0], whole=whole)

    def _report(
        self, step: int, name: str, active: np.ndarray, used: list[int], pct: float, whole: str = ""
    ) -> bool:
        where = f"step {step}" if len(used) == 1 else f"steps {used[-1]}..{used[0]}"
        self.report_issue(
            f"{self.fmt(pct)}% of the {active.shape[1]} ReLUs in {name} are active in fewer than "
            f"{self.fmt(self.threshold_inactivity)}% of {active.shape[0]} samples ({where}) "
            f"(> threshold_layer {self.fmt(self.threshold_layer)}%){whole}",
            tensor=name,
            value=pct,
            threshold=self.threshold_layer,
            samples=int(active.shape[0]),
        )
        return True

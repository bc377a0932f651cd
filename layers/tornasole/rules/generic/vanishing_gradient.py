"""VanishingGradient: a layer's gradients have (almost) vanished.

Chosen reading: the mean of |gradient| is computed **per tensor** (per layer
parameter) with ``reduction_value(step, "mean", abs=True)`` — a saved
``abs_mean`` reduction if the hook saved one, else computed from the full
tensor — and the rule fires when any one tensor is below ``threshold``: a
single layer whose gradients vanish is already a stuck layer, and a mean over
all layers would let large gradients elsewhere hide it. Details name the first
(by name) tensor below the threshold.
"""

from __future__ import annotations

from tornasole.rules.generic.base import BuiltinRule
from tornasole.rules.params import Param

__all__ = ["VanishingGradient"]


class VanishingGradient(BuiltinRule):
    """Fires when mean(|gradient|) of any gradient tensor is below ``threshold``.

    Parameters
    ----------
    base_trial : Trial
    threshold : float or str
        Default ``0.0000001``.

    Examples
    --------
    >>> from tornasole.rules import invoke_rule
    >>> from tornasole.rules.generic import VanishingGradient
    >>> # invoke_rule(VanishingGradient(trial, threshold="0.0001"))
    """

    READS_EARLIER_STEPS = False
    PARAMETERS = (Param("threshold", "float", "0.0000001", "mean |gradient| below this fires"),)
    COLLECTIONS = (("gradients", {"save_interval": "500"}),)

    def invoke_at_step(self, step: int) -> bool:
        fired = False
        for name in self.names_at(step, ["gradients"]):
            m = float(self.base_trial.tensor(name).reduction_value(step, "mean", abs=True))
            if m < self.threshold:
                if not fired:
                    self.report_issue(
                        f"mean(|{name}|)={self.fmt(m)} < threshold {self.fmt(self.threshold)}",
                        tensor=name,
                        value=m,
                        threshold=self.threshold,
                    )
                fired = True
        return fired

"""SaturatedActivation: tanh/sigmoid units sit in their flat regions.

Chosen reading (as DeadRelu): per tensor named ``*tanh_input*`` or
``*sigmoid_input*`` (the activation's input), a unit is *active* in a sample
when its input lies strictly inside ``(threshold_<fn>_min, threshold_<fn>_max)``
(outside, the gradient of the activation is ~0); a unit is saturated when active
in fewer than ``threshold_inactivity`` % of the batch; the layer fires when more
than ``threshold_layer`` % of its units are saturated. Tensors whose name says
neither tanh nor sigmoid are ignored (their bounds are unknown).

Fraction-of-values criterion (DeepDiagnosis, ICSE'22), used instead of the
per-unit one when ``fraction_saturated`` is set: the layer fires when more than
``fraction_saturated`` % of all its input values (every unit of every sample)
lie outside the bounds. DeepDiagnosis uses bounds of ±5 and 50%. SageMaker's
per-unit reading (a unit counts only when saturated on ~every sample, bounds
±9.5 for tanh) misses layers where most, but not all, inputs are saturated.

Output layer (``skip_output_layer``, off by default): DeepDiagnosis's
criterion is about the units a layer passes on to the next; the output
layer's sigmoid of a BCE classifier is driven to saturation by its loss on
every healthy run that learns (a confident prediction is a logit beyond ±5).
With the option, the activation tensor the trial saved last before the step's
first loss tensor (:meth:`Trial.saved_order`: a hook writes a module's input as
the forward pass reaches it, so that is the layer that feeds the loss) is not
judged. No name is trusted for it; a trial that cannot tell the order, or a
step with no loss saved after an activation, judges every layer as before.
"""

from __future__ import annotations

import numpy as np

from tornasole.rules.builtin.base import COLLECTION_NAMES, BuiltinRule
from tornasole.rules.builtin.dead_relu import inactive_percent
from tornasole.rules.params import Param

__all__ = ["SaturatedActivation"]


class SaturatedActivation(BuiltinRule):
    """Fires when more than ``threshold_layer`` % of a tanh/sigmoid layer's units are saturated.

    Examples
    --------
    >>> # invoke_rule(SaturatedActivation(trial))
    """

    LIKELY_CAUSE = (
        "tanh/sigmoid units of hidden layer {tensor} are saturated (their gradient is ~0): inputs not "
        "normalised or weights too large"
    )
    SUGGESTED_FIX = (
        "normalise the inputs, use ReLU in hidden layers, lower the initial weight scale, or add "
        "BatchNorm/LayerNorm before the activation"
    )

    READS_EARLIER_STEPS = False
    PARAMETERS = (
        COLLECTION_NAMES,
        Param("tensor_regex", "regex", ".*tanh_input|.*sigmoid_input", "activation inputs (re.match)"),
        Param("threshold_tanh_min", "float", "-9.4999", "tanh input below this is saturated"),
        Param("threshold_tanh_max", "float", "9.4999", "tanh input above this is saturated"),
        Param("threshold_sigmoid_min", "float", "-23", "sigmoid input below this is saturated"),
        Param("threshold_sigmoid_max", "float", "16.99999", "sigmoid input above this is saturated"),
        Param("threshold_inactivity", "float", "1.0", "% of samples below which a unit counts as saturated"),
        Param("threshold_layer", "float", "50.0", "% of saturated units above which the layer fires"),
        Param(
            "fraction_saturated",
            "float",
            None,
            "% of all values outside the bounds above which the layer fires (DeepDiagnosis: 50); unset: off",
        ),
        Param(
            "skip_output_layer",
            "bool",
            "False",
            "do not judge the activation that feeds the loss (the last saved before the step's loss)",
        ),
    )

    def output_layer(self, step: int, names: list[str]) -> str | None:
        """Of ``names``, the one the trial saved last before the first tensor of the ``losses`` collection
        at ``step``, provided no other module's forward tensor was saved between them (None when the trial
        cannot tell, or no loss follows an activation). Why the proviso: a tanh block followed by a ReLU
        block and a linear head is a hidden layer; only the activation the loss reads directly is the
        output (its own output tensor, same module, may follow it)."""
        saved_order = getattr(self.base_trial, "saved_order", None)
        if saved_order is None:
            return None
        losses = set(self.names_at(step, ["losses"]))
        # the loss module's own inputs (``BCELoss_input_0``, saved when a collection asks) are the loss's
        loss_modules = {_module_of(n) for n in losses}
        last, module = None, None
        for name in saved_order(step):
            if name in losses or _module_of(name) in loss_modules:
                return last
            if name.startswith("gradient/"):
                continue
            if name in names:
                last, module = name, _module_of(name)
            elif last is not None and _module_of(name) != module:
                last = None  # another layer ran after it: it is a hidden layer
        return None

    def invoke_at_step(self, step: int) -> bool:
        names = self.selected(step)
        output = self.output_layer(step, names) if self.skip_output_layer else None
        for name in names:
            if name == output:
                continue
            low = name.lower()
            if "tanh" in low:
                lo, hi = self.threshold_tanh_min, self.threshold_tanh_max
            elif "sigmoid" in low:
                lo, hi = self.threshold_sigmoid_min, self.threshold_sigmoid_max
            else:
                continue
            v = self.value(name, step)
            if v is None or v.size == 0:
                continue
            inside = (v > lo) & (v < hi)
            if self.fraction_saturated is not None:
                pct = float(100.0 - np.mean(inside) * 100.0)
                if pct > self.fraction_saturated:
                    self.report_issue(
                        f"{self.fmt(pct)}% of the {v.size} values of {name} lie outside "
                        f"({self.fmt(lo)}, {self.fmt(hi)}) (> fraction_saturated "
                        f"{self.fmt(self.fraction_saturated)}%)",
                        tensor=name,
                        value=pct,
                        threshold=self.fraction_saturated,
                    )
                    return True
                continue
            pct = inactive_percent(inside, self.threshold_inactivity)
            if pct > self.threshold_layer:
                self.report_issue(
                    f"{self.fmt(pct)}% of units in {name} are inside ({self.fmt(lo)}, {self.fmt(hi)}) "
                    f"in fewer than {self.fmt(self.threshold_inactivity)}% of samples (> threshold_layer "
                    f"{self.fmt(self.threshold_layer)}%)",
                    tensor=name,
                    value=pct,
                    threshold=self.threshold_layer,
                )
                return True
        return False


def _module_of(name: str) -> str:
    """The module a saved tensor belongs to: ``Net_out_sigmoid_input_0`` -> ``Net_out_sigmoid``,
    ``Net_block2.fc.weight`` -> ``Net_block2.fc`` (the hooks' naming of inputs, outputs and parameters)."""
    head, sep, tail = name.rpartition("_")
    if sep and tail.isdigit():
        for kind in ("_input", "_output"):
            if head.endswith(kind):
                return head[: -len(kind)]
    return name.rpartition(".")[0] or name

"""NonFiniteOrigin: names the first module whose output, or parameter, or gradient, went NaN/Inf.

ExplodingTensor says *that* a NaN appeared; by then every later layer, the loss and all gradients
carry it, and the name it reports is the first in alphabetical order. What a user needs is the layer
where it started. OLMo-core's NaN checker (``olmo_core/train/callbacks/nan_checker.py``) answers that
by hooking every module's forward pass and reporting the first whose output is not finite; this rule
reads the same from what the hook saved:

* tensors are visited in the order the hook wrote them at the step (:meth:`Trial.saved_order`): module
  inputs and outputs as the forward pass reached them, then gradients as the backward pass produced them
  (from the loss back towards the input);
* the first forward tensor (not of the ``gradients`` collection) holding NaN/Inf is the origin; when it
  is a parameter (of the ``weights``/``biases`` collections, or named ``<model>_<path>.weight``/``.bias``)
  the finding says "parameter" and names it, since the cause is then the update that wrote it (or the
  checkpoint it was loaded from), not a module's forward computation;
* when every forward tensor is finite, the first gradient holding NaN/Inf is (the backward pass went
  non-finite there: a ``sqrt``, ``log`` or division at 0 whose forward value was fine);
* a tensor saved only as reductions (the statistics mode) counts as non-finite when a reduction is NaN
  or Inf, or when a reduction that counts non-finite values (a name holding ``nan``, ``inf`` or
  ``finite``, such as ``nonfinite_count``) is above 0.

``skip_scaler_overflow`` (on by default): a step where only gradients are non-finite and every saved loss
is finite is a step an fp16 loss scaler skipped on purpose (ExplodingTensor's ``skip_scaler_overflow``
reading); it is passed over (LossScaleCollapse judges whether that happens too often). A backward pass
that goes non-finite without a scaler corrupts the weights at the optimiser step, and the next step's
forward pass names the module that first shows it. Why not only when a ``loss_scale`` was saved: the
families benchmark's runs with one fp16 step a scaler skipped save no scale, and all six fired.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tornasole.rules.builtin.base import COLLECTION_NAMES, TENSOR_REGEX, BuiltinRule
from tornasole.rules.params import Param

__all__ = ["NonFiniteOrigin"]

_COUNTING = ("nan", "inf", "finite")


def module_of(name: str) -> str:
    """The module (or parameter) a saved tensor belongs to: ``layers.0.attn_output_0`` -> ``layers.0.attn``,
    ``gradient/Net_fc1.weight`` -> ``Net_fc1.weight``."""
    base = name.split("/", 1)[1] if name.startswith(("gradient/", "gradients/")) else name
    for marker in ("_output_", "_input_"):
        if marker in base:
            return base.rsplit(marker, 1)[0]
    return base


def _looks_like_parameter(name: str) -> bool:
    """A PyTorch parameter's saved name (``Net_fc1.weight``, ``Net_fc1.bias``) when no collection says so:
    no module input/output marker, and a last path component that parameters have."""
    if name.startswith(("gradient/", "gradients/", "scalar/")) or "_output_" in name or "_input_" in name:
        return False
    return name.rsplit(".", 1)[-1] in ("weight", "bias") and "." in name


class NonFiniteOrigin(BuiltinRule):
    """Fires when a saved tensor is NaN/Inf; the finding names the first module (forward, then backward).

    Examples
    --------
    >>> # invoke_rule(NonFiniteOrigin(trial))
    """

    LIKELY_CAUSE = (
        "the first non-finite value appeared in {tensor}: an overflow there (fp16 range, exp/softmax of "
        "large logits), a log/sqrt/division at 0, or a NaN in its input data"
    )
    SUGGESTED_FIX = (
        "check {tensor}'s inputs and its numerically unsafe ops (add an epsilon, compute it in fp32, use "
        "log_softmax), lower the learning rate, or clip gradients"
    )

    READS_EARLIER_STEPS = False
    PARAMETERS = (
        COLLECTION_NAMES,
        TENSOR_REGEX,
        Param(
            "skip_scaler_overflow",
            "bool",
            "True",
            "pass over a step where only gradients are non-finite and the losses are finite (a step an fp16 "
            "loss scaler skipped)",
        ),
    )

    def _order(self, step: int) -> list[str]:
        saved_order = getattr(self.base_trial, "saved_order", None)
        names = list(saved_order(step)) if saved_order is not None else []
        present = set(self.base_trial.tensor_names(step=step))
        names = [n for n in names if n in present] + sorted(present - set(names))
        if self.collection_names or self.tensor_regex is not None:
            chosen = set(self.selected(step))
            names = [n for n in names if n in chosen]
        return names

    def invoke_at_step(self, step: int) -> bool:
        names = self._order(step)
        gradients = set(self.names_at(step, ["gradients"])) | {n for n in names if n.startswith("gradient")}
        forward = [n for n in names if n not in gradients]
        backward = [n for n in names if n in gradients]
        for phase, group in (("forward", forward), ("backward", backward)):
            for name in group:
                bad = self._non_finite(name, step)
                if bad is None:
                    continue
                if phase == "backward" and self.skip_scaler_overflow and self._scaler_skipped(step):
                    return False
                where, owner = self._kind_of(name, step, phase)
                module = module_of(name)
                self.report_issue(
                    f"first non-finite {where} at step {step} ({phase} pass, in saved order): {name} "
                    f"({owner} {module}: {bad})",
                    tensor=module,
                    tensor_name=name,
                    phase=phase,
                )
                return True
        return False

    def _kind_of(self, name: str, step: int, phase: str) -> tuple[str, str]:
        """What ``name`` is, for the finding: ``("parameter", "parameter")`` for a weight or bias (the
        optimiser wrote a NaN into it, or it was loaded so), ``("input"|"output", "module")`` for a module's
        forward tensor, ``("gradient", "module")`` in the backward pass."""
        if phase == "backward":
            return "gradient", "module"
        if name in set(self.names_at(step, ["weights", "biases"])) or _looks_like_parameter(name):
            return "parameter", "parameter"
        base = name.rsplit("/", 1)[-1]
        if "_input_" in base and "_output_" not in base:
            return "input", "module"
        return "output", "module"

    def _non_finite(self, name: str, step: int) -> str | None:
        """What is non-finite in ``name`` at ``step`` (a short description), or None."""
        v = self.value(name, step)
        if v is not None:
            if v.dtype.kind not in "fc" or v.size == 0:
                return None
            n_nan, n_inf = int(np.count_nonzero(np.isnan(v))), int(np.count_nonzero(np.isinf(v)))
            return f"{n_nan} NaN, {n_inf} Inf of {v.size} values" if n_nan or n_inf else None
        try:
            reductions: dict[Any, Any] = self.base_trial.tensor(name).reduction_values(step)
        except Exception:  # noqa: BLE001 - nothing readable for this tensor: nothing to check
            return None
        for key, raw in reductions.items():
            label = key[0] if isinstance(key, tuple) else str(key)
            value = float(np.asarray(raw, dtype=np.float64).reshape(-1)[0])
            if not math.isfinite(value):
                return f"reduction {label} = {value}"
            lower = str(label).lower()
            if value > 0 and any(word in lower for word in _COUNTING) and "isfinite" not in lower:
                return f"reduction {label} = {self.fmt(value)}"
        return None

    def _scaler_skipped(self, step: int) -> bool:
        losses = self.names_at(step, ["losses"])
        return bool(losses) and all(self._non_finite(n, step) is None for n in losses)

"""VanishingGradient: a layer's gradients have (almost) vanished.

Chosen reading: the mean of |gradient| is computed **per tensor** (per layer
parameter) with ``reduction_value(step, "mean", abs=True)`` — a saved
``abs_mean`` reduction if the hook saved one, else computed from the full
tensor — and the rule fires when any one tensor is below ``threshold``: a
single layer whose gradients vanish is already a stuck layer, and a mean over
all layers would let large gradients elsewhere hide it. Details name the first
(by name) tensor below the threshold.

Gradient-norm ratio (AUTOTRAINER's criterion, ICSE'21), off unless
``norm_ratio_threshold`` is set: the L2 norm of the first layer's weight
gradient divided by the last layer's; the rule also fires when that ratio is
below ``norm_ratio_threshold`` and the first layer's norm is below
``first_norm_threshold`` (AUTOTRAINER: 1e-3 and 1e-4). This catches gradients
that shrink layer by layer (deep sigmoid/tanh stacks) long before any mean
reaches 1e-7. First and last layers: the tensors matched by
``first_layer_regex``/``last_layer_regex`` when given; else the gradient
tensors not named ``*bias`` in natural name order (``fc2`` before ``fc10``,
``layers.0`` before ``layers.1``), first and last of that order.

Loss gate (Tornasole's addition, off unless ``loss_drop_percent`` is set):
the rule stays quiet at a step where the training loss has already come down
by at least that % from its start (mean of the first ``loss_window`` saved
TRAIN losses against the mean of the last ``loss_window`` up to the step, the
two windows overlapping until there are twice as many, for every tensor of the
``losses`` collection; judged from ``loss_window + 1`` saved TRAIN losses). Why: when the loss goes to 0 the
gradients go with it (a net with a large initialisation that fits its data
has first-layer bias gradients of 1e-12), which is a converged run, not a
vanishing gradient. AUTOTRAINER gates its gradient checks the same way, on an
accuracy that is not converging. A net whose gradients vanish has a loss that
barely moved. Without a saved training loss the gradients are judged alone and
the report says so.

Biases judged with their layer (``bias_by_layer``, off by default): a bias
gradient below ``threshold`` is passed over when the same layer's weight
gradient (the tensor named alike with ``weight`` for ``bias``, or Keras's ``kernelGrad`` for ``biasGrad``)
is not. Why: a
bias that feeds a BatchNorm (a convolution or linear layer with ``bias=True``
before a BatchNorm, common in user code) has a gradient that is exactly zero
in theory (the normalisation subtracts the batch mean) and 1e-8 in floating
point, on healthy runs from step 0; the families benchmark
(``bench/detection/families``, CNN and regression families) alarmed on every
healthy run that way. A layer whose gradients vanish has a vanishing weight
gradient too, which the check still sees.

Persistence (``persist_steps``, 1 by default: SageMaker's per-step reading): the
rule fires only when the mean or norm-ratio check held at each of the last
``persist_steps`` saved steps of the tensor it names (at the start of a run,
every one saved so far, so gradients that vanish from step 0 are reported at
step 0). Why: the last batch of an epoch can hold two samples, and a BatchNorm
of two samples outputs +-1 whatever its inputs, so every layer before it gets a
zero gradient in exact arithmetic (1e-9 in floating point) on that one batch:
weight and bias alike, which ``bias_by_layer`` cannot pass over. The families
benchmark's batch-4 regressions (330 training samples) alarmed on that batch
alone, with the gradients 1e-2 at the saved steps around it. Broken runs'
gradients vanish intermittently too (a learning rate x100 that kills the first
layer on some batches, a deep sigmoid stack hovering at the norm-ratio
threshold), so with ``persist_only_with_norm`` the persistence is asked only of
a network that has a normalisation layer (a 1-D gradient whose name holds no
``bias``: a BatchNorm's or LayerNorm's scale, PyTorch's ``weight``, Keras's
``gamma``), the only kind where one batch can zero the gradients before it;
elsewhere each step is judged alone. On the families benchmark
``persist_steps=2`` alone lost three detections in families without a
normalisation layer (binary_keras, autoencoder); gated, none
(``bench/RESULTS.md``, branch quiet).
"""

from __future__ import annotations

import math
import re

import numpy as np

from tornasole.exceptions import TensorUnavailableForStep
from tornasole.modes import TRAIN
from tornasole.rules.builtin.base import BuiltinRule, as_float
from tornasole.rules.params import Param

__all__ = ["VanishingGradient", "natural_key"]

#: A bias gradient as the hooks name it: PyTorch ``gradients/fc1.bias``, Keras ``gradients/net/fc1/biasGrad``.
_BIAS = re.compile(r"^(?P<layer>.*)bias(?P<suffix>Grad)?$")


def _weight_of_bias(name: str, names: list[str]) -> str | None:
    """The weight gradient of the layer whose bias gradient is ``name``, among ``names`` (PyTorch's
    ``...weight``, Keras's ``...kernelGrad``); None when ``name`` is no bias or its layer saved no weight.

    >>> _weight_of_bias("gradients/net/fc1/biasGrad", ["gradients/net/fc1/kernelGrad"])
    'gradients/net/fc1/kernelGrad'
    >>> _weight_of_bias("gradients/fc1.bias", ["gradients/fc1.weight"])
    'gradients/fc1.weight'
    """
    m = _BIAS.match(name)
    if m is None:
        return None
    suffix = m["suffix"] or ""
    for kind in ("weight", "kernel"):
        candidate = f"{m['layer']}{kind}{suffix}"
        if candidate in names:
            return candidate
    return None


def natural_key(name: str) -> list:
    """Sort key that orders embedded numbers numerically (``fc2`` < ``fc10``).

    Examples
    --------
    >>> sorted(["g/fc10.weight", "g/fc2.weight"], key=natural_key)
    ['g/fc2.weight', 'g/fc10.weight']
    """
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


class VanishingGradient(BuiltinRule):
    """Fires when mean(|gradient|) of a gradient tensor is below ``threshold`` (or first/last norm ratio).

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

    LIKELY_CAUSE = "the gradients of {tensor} have vanished (deep sigmoid/tanh stacks, poor initialisation)"
    SUGGESTED_FIX = (
        "use ReLU activations, He/Xavier initialisation, normalisation layers or residual connections"
    )

    READS_EARLIER_STEPS = False
    PARAMETERS = (
        Param("threshold", "float", "0.0000001", "mean |gradient| below this fires"),
        Param(
            "norm_ratio_threshold",
            "float",
            None,
            "first/last layer gradient L2-norm ratio below this fires (AUTOTRAINER: 0.001); unset: off",
        ),
        Param(
            "first_norm_threshold",
            "float",
            "0.0001",
            "with norm_ratio_threshold: the first layer's gradient norm must also be below this",
        ),
        Param("first_layer_regex", "regex", None, "first layer's gradient (re.match); unset: natural order"),
        Param("last_layer_regex", "regex", None, "last layer's gradient (re.match); unset: natural order"),
        Param(
            "loss_drop_percent",
            "float",
            None,
            "quiet at steps where the training loss came down by at least this % from its start "
            "(the gradients vanished with the loss); unset: not checked",
        ),
        Param("loss_window", "int", "5", "with loss_drop_percent: saved TRAIN losses averaged at each end"),
        Param(
            "bias_by_layer",
            "bool",
            "False",
            "the mean check passes over a bias whose layer's weight gradient is not below threshold (a bias "
            "feeding a BatchNorm has a zero gradient on healthy runs)",
        ),
        Param(
            "persist_steps",
            "int",
            "1",
            "fire only when a check held at this many consecutive saved steps of the tensor it names (every "
            "one saved so far at the start of the run); 1: each step alone",
        ),
        Param(
            "persist_only_with_norm",
            "bool",
            "False",
            "with persist_steps: ask persistence only of a network with a normalisation layer (a 1-D "
            "gradient not named bias); elsewhere each step alone",
        ),
        Param(
            "skip_all_zero",
            "bool",
            "False",
            "the mean check passes over a tensor that is exactly 0 everywhere (a dead layer, not a vanishing "
            "one: DeadRelu's and ZeroGradients' finding)",
        ),
    )
    COLLECTIONS = (("gradients", {"save_interval": "500"}),)

    def check_params(self) -> None:
        self.require_at_least(1, "loss_window", "persist_steps")
        if self.loss_drop_percent is not None and not 0 < self.loss_drop_percent <= 100:
            raise self.param_error(
                "loss_drop_percent", f"value {self.loss_drop_percent} must be within (0, 100]"
            )

    def history_steps(self) -> int | None:
        if self.persist_steps > 1:
            return None  # the earlier saved TRAIN steps may lie a whole validation pass back
        # the last loss_window saved TRAIN losses (validation steps may lie between them)
        return 0 if self.loss_drop_percent is None else 4 * self.loss_window

    def leading_steps(self) -> int:
        return 0 if self.loss_drop_percent is None else 4 * self.loss_window

    def invoke_at_step(self, step: int) -> bool:
        found = self._finding(step)
        if found is None:
            return False
        message, values = found
        if self.persist_steps > 1 and (not self.persist_only_with_norm or self._has_norm_layer(step)):
            if not self._persisted(values["tensor"], step):
                return False  # one batch's gradients (a two-sample batch through a BatchNorm), not a state
            message += f" (and at the {self.persist_steps - 1} saved step(s) before)"
        if self.loss_drop_percent is not None:
            dropped, note = self._loss_dropped(step)
            if dropped:
                return False  # the gradients vanished because the loss did: a converged run
            message += note
        self.report_issue(message, **values)
        return True

    def _finding(self, step: int) -> tuple[str, dict] | None:
        """``(message, values)`` of the mean check, else the norm-ratio check, at ``step``; None if neither
        holds. Cached per step: with ``persist_steps`` a step is judged again as a later step's past."""
        cache = self.__dict__.setdefault("_findings", {})
        if step in cache:
            return cache[step]
        names = self.names_at(step, ["gradients"])
        found: tuple[str, dict] | None = None
        for name in names:
            m = self._mean_abs(name, step)
            if m is not None and m < self.threshold and not self._bias_of_live_layer(name, names, step):
                found = (
                    f"mean(|{name}|)={self.fmt(m)} < threshold {self.fmt(self.threshold)}",
                    {"tensor": name, "value": m, "threshold": self.threshold},
                )
                break
        if found is None and self.norm_ratio_threshold is not None:
            found = self._norm_ratio(step, names)
        cache[step] = found
        return found

    def _has_norm_layer(self, step: int) -> bool:
        """Whether a gradient saved at ``step`` is a normalisation layer's scale: 1-D, no ``bias`` in its name
        (a Linear or convolution weight has two dimensions or more; a GRU's ``bias_ih_l0`` is a bias)."""
        for name in self.names_at(step, ["gradients"]):
            if "bias" in name.lower():
                continue
            try:
                if len(self.base_trial.tensor(name).shape(step)) == 1:
                    return True
            except TensorUnavailableForStep:
                continue
        return False

    def _persisted(self, name: str, step: int) -> bool:
        """Whether a check also held at each of the ``persist_steps - 1`` saved steps of ``name`` (same mode)
        before ``step``; at the start of the run, at every one saved so far."""
        earlier = self.same_mode_steps(name, step)[:-1][-(self.persist_steps - 1) :]
        return all(self._finding(s) is not None for s in earlier)

    def _mean_abs(self, name: str, step: int) -> float | None:
        """mean(|gradient|), from a saved ``abs_mean`` reduction or the values; None with ``skip_all_zero``
        when the values are all exactly 0."""
        if self.skip_all_zero:
            v = self.value(name, step)
            if v is not None and not np.any(v):
                return None
        return as_float(self.base_trial.tensor(name).reduction_value(step, "mean", abs=True))

    def _bias_of_live_layer(self, name: str, names: list[str], step: int) -> bool:
        """With ``bias_by_layer``: ``name`` is a bias whose layer's weight gradient is not below threshold."""
        if not self.bias_by_layer:
            return False
        weight = _weight_of_bias(name, names)
        if weight is None:
            return False
        m = self._mean_abs(weight, step)
        return m is not None and m >= self.threshold

    def _loss_dropped(self, step: int) -> tuple[bool, str]:
        """``(came down, note)``: whether every training loss came ``loss_drop_percent`` % below its start
        by ``step``, and what the report says about it."""
        trial = self.base_trial
        try:
            losses = sorted(trial.tensor_names(collection="losses"))
        except (KeyError, ValueError):
            losses = []
        shown = []
        for name in losses:
            steps = self.same_mode_steps(name, step, mode=TRAIN)
            if not steps and name.startswith("val_"):
                continue  # a validation loss (Keras's epoch-end ``val_loss``): no training loss to judge
            if len(steps) <= self.loss_window:
                return False, "; the training loss has too few saved steps to tell a converged run"
            first = [self.scalar(name, s) for s in steps[: self.loss_window]]
            last = [self.scalar(name, s) for s in steps[-self.loss_window :]]
            values = [v for v in first + last if v is not None]
            if len(values) < len(first) + len(last) or not all(math.isfinite(v) for v in values):
                return False, f"; {name} is missing or not finite: not a converged run"
            start, now = float(np.mean(first)), float(np.mean(last))
            drop = 100.0 * (start - now) / abs(start) if start else 0.0
            if drop < self.loss_drop_percent:
                return False, (
                    f"; {name} (TRAIN) came down {self.fmt(drop)}% from its start "
                    f"({self.fmt(start)} -> {self.fmt(now)}) < loss_drop_percent "
                    f"{self.fmt(self.loss_drop_percent)}%"
                )
            shown.append(name)
        if not shown:
            return False, "; no training loss saved: judged on the gradients alone"
        return True, ""

    def _ends(self, names: list[str]) -> tuple[str | None, str | None]:
        def pick(regex: re.Pattern | None, default: str | None) -> str | None:
            if regex is None:
                return default
            hits = sorted((n for n in names if regex.match(n)), key=natural_key)
            return hits[0] if hits else None

        ordered = sorted((n for n in names if not _BIAS.match(n)), key=natural_key) or sorted(
            names, key=natural_key
        )
        if len(ordered) < 2 and (self.first_layer_regex is None or self.last_layer_regex is None):
            ordered = []
        first = pick(self.first_layer_regex, ordered[0] if ordered else None)
        last = pick(self.last_layer_regex, ordered[-1] if ordered else None)
        return first, last

    def _norm(self, name: str, step: int) -> float | None:
        """L2 norm: from the values, else a saved ``l2`` reduction (plain or abs), else None."""
        v = self.value(name, step)
        if v is not None:
            return float(np.linalg.norm(v.astype(np.float64).ravel()))
        for abs_ in (True, False):
            try:
                return as_float(self.base_trial.tensor(name).reduction_value(step, "l2", abs=abs_))
            except TensorUnavailableForStep:
                continue
        return None

    def _norm_ratio(self, step: int, names: list[str]) -> tuple[str, dict] | None:
        """``(message, values)`` when AUTOTRAINER's first/last norm ratio holds at ``step``, else None."""
        first, last = self._ends(names)
        if first is None or last is None or first == last:
            return None
        n_first, n_last = self._norm(first, step), self._norm(last, step)
        if n_first is None or n_last is None or n_last == 0:
            return None
        ratio = n_first / n_last
        if ratio < self.norm_ratio_threshold and n_first < self.first_norm_threshold:
            return (
                f"||{first}|| / ||{last}|| = {self.fmt(n_first)} / {self.fmt(n_last)} = {self.fmt(ratio)} "
                f"< norm_ratio_threshold {self.fmt(self.norm_ratio_threshold)} and ||{first}|| < "
                f"first_norm_threshold {self.fmt(self.first_norm_threshold)}",
                {
                    "tensor": first,
                    "value": ratio,
                    "first_norm": n_first,
                    "last_norm": n_last,
                    "threshold": self.norm_ratio_threshold,
                },
            )
        return None

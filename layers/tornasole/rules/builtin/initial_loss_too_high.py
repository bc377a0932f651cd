"""InitialLossTooHigh: the first training loss is far above what an untrained classifier scores.

Published criterion: "verify loss @ init" (A. Karpathy, "A Recipe for Training Neural Networks",
2019): a classifier whose weights are initialised well outputs near-uniform probabilities, so its first
cross-entropy is about ln(C) for C classes (ln 2 per output of a sigmoid/BCE classifier). A first loss
many times higher means confident wrong outputs before any training: weights initialised at too large a
scale (DeepFD's initialisation mutant) or unnormalised inputs.

Reading: the mean of the first ``steps`` losses saved in TRAIN mode (GLOBAL for a trial saved without
modes), the first of them at the mode's step 0, is judged once, at the last of them; the rule fires when
it exceeds ``any_init_factor`` x the chance level, or ``factor`` x it with weights beyond any standard
initialisation (below). A trial whose first saved loss is a later step's (a save
configuration starting later; the serverless evaluator's view of a long run without its first steps) is
not judged: that loss is no loss at initialisation.
The chance level, first found wins:

1. ``chance_loss``, when set (any loss: e.g. the variance of a regression's targets for an MSE);
2. ln(``num_classes``), when set;
3. from the trial: ln 2 for a loss the PyTorch hook names after ``BCELoss``/``BCEWithLogitsLoss``;
   ln(C) for ``CrossEntropyLoss``/``NLLLoss``, where C is the width of the layer that feeds the loss:
   the leading dimension of the first gradient the trial saved after the loss at that step (backward
   runs from the loss, so the first gradient written belongs to the output layer: its bias has C
   entries, its PyTorch weight C rows). The Keras hook's batch loss the same way
   (``batch_loss/BinaryCrossentropy``: ln 2; ``batch_loss/[Sparse]CategoricalCrossentropy``: ln C, C the
   last axis of the ``predictions`` saved with it; :mod:`tornasole.rules.builtin.losses`);
4. for a squared-error loss (``squared_error_regex``: PyTorch's ``MSELoss`` and the Keras hook's
   ``batch_loss/MeanSquaredError`` unless set), the mean square of the targets the loss was computed against
   at that step (``<Loss>_input_1``; Keras: ``labels``): the loss of predicting zero, what an untrained,
   well-initialised regression head outputs (:mod:`tornasole.rules.builtin.squared_error_chance` says why
   not the targets' variance). For untrained outputs y uncorrelated with the targets t the first loss is
   (1 + E[y^2]/E[t^2]) times it. A run that saved no target is not judged, and the step says which tensor
   is missing.

A loss with no chance level (a Keras ``loss`` with no ``num_classes``, an MSE that saved no target)
is not judged.

Two tiers for a cross-entropy (or a given level; a squared error: below). ``factor`` 1.4 was set on the
families benchmark, whose models start at PyTorch's default initialisation (healthy 0.9-1.22 x chance).
Glorot (Keras's default) and He on every layer, the output layer too, start small healthy classifiers above
1.4 x chance on 0-14% and 22-58% of seeds, up to 2.5x and 6.2x (He normal, 1000 seeds; batches of 8-64;
``bench/detection/families/init_ratios.py``). So:

1. above ``any_init_factor`` (8) x chance it fires whatever the weights (unnormalised inputs leave them
   standard: the families' binary inputs x100 start 10.9-29x);
2. above ``factor`` x chance it fires only when the weights saved at that step are beyond any standard
   initialisation: the median over the weight tensors of two or more axes of std x sqrt(fan-in)
   (:func:`weight_scale`) exceeds ``init_scale`` (3). That scale is 0.58 at PyTorch's default, 1 at
   LeCun's, at most sqrt(2) at Glorot's and He's (2 with Glorot at a ReLU gain), 4.5-4.9 at the families'
   x8 (whose cnn, rnn and transformer start only 1.56-2.77x chance: normalisation absorbs the scale). The
   median, not the largest: a small output layer's sampling noise (up to 2.2 at He) and one embedding table
   at N(0, 1) (sqrt(width); left out by name too, ``scale_exclude_regex``) do not decide. A run that saved
   no weights at that step is judged by tier 1 alone.

The same two tiers for a squared error, whose level, unlike ln C, moves with the targets' units:

1. ``squared_error_any_factor``, whatever the weights, is unset (off) by default: no value is safe.
   Over 1,000 seeds each of the families' regression model (BatchNorm) and a plain 10-32-32-1 ReLU MLP,
   first batches of 4-64 of standardised targets (``bench/detection/families/mse_init_ratios.py``),
   healthy starts reach 7.5x at PyTorch's default, 17x at LeCun's, 21x at Glorot's, 33x with He on the
   hidden layers, 60x with He on every layer and 62x at Glorot with a ReLU gain (a batch of 4 whose
   targets are near 0); with the same targets in units 10 times smaller, PyTorch's default reaches 331x
   and He 2,289x, though nothing is wrong but the targets' units. A user whose targets are standardised
   may set it (100 clears those healthy tails at 1.6x).
2. above ``squared_error_factor`` (2) x the level it fires when the weights saved at that step are beyond
   any standard initialisation (``init_scale``, as above): 2 is the criterion's own line, untrained
   outputs as loud as the targets (Karpathy: initialise the last layer for the targets' scale). Without
   the gate no factor was safe (He on every layer starts 3-28% of those healthy regressors above 4 x the
   level); with it, standard starts never reach it: their median weight scale is at most 1.54 (He, with
   noise; Glorot at a ReLU gain 1.48; a single tensor up to 2.42), x8 4.3-4.9 (1,000 seeds). Designed on the
   families benchmark's ``regression``: built-healthy 0.98-1.22 x the level, initialisation x8 5.8-8.6
   (its BatchNorm absorbs all but the output layer's scale); over 1,000 seeds of that model at x8, 99.7%
   start above 2 with a first batch of 16 (93% above 4). Held out: ``regression_keras`` (Keras's kernel
   ``(in, out)``: fan-in axis 0; healthy scale 0.58-0.59, x8 4.6-4.7) and ``autoencoder`` (healthy
   0.75-0.85 x the level; x8 1.7-1.8, a sigmoid bounds the loss: RegressionWorseThanMean's finding).

A run that saved no weights at that step, or standard ones, is not judged while
``squared_error_any_factor`` is unset, and needs no target. To leave squared errors unjudged, set
``squared_error_regex`` to a pattern no loss matches (``^$``).

A model fine-tuned from pretrained weights starts from a scale no initialisation describes, but its
first loss is at or below chance, never above: neither tier reaches it.
"""

from __future__ import annotations

import math

import numpy as np

from tornasole.modes import GLOBAL, TRAIN
from tornasole.rules.builtin.base import TENSOR_REGEX, BuiltinRule
from tornasole.rules.builtin.losses import BINARY_CROSS_ENTROPY, CROSS_ENTROPY, loss_feed, loss_names
from tornasole.rules.builtin.squared_error_chance import SQUARED_ERROR, squared_error_chance
from tornasole.rules.params import Param

__all__ = [
    "InitialLossTooHigh",
    "CROSS_ENTROPY",
    "BINARY_CROSS_ENTROPY",
    "EMBEDDING",
    "weight_scale",
    "output_width",
]

# embedding tables by their usual names (PyTorch ``embed``/``embedding``, GPT-2's ``wte``/``wpe``; Keras
# ``weights/<...>/embeddings``): a lookup's rows are outputs, not sums over a fan-in
EMBEDDING = r"(?i).*(emb|(^|[._/])w[tp]e([._/]|$))"


def weight_scale(name: str, value: np.ndarray) -> float | None:
    """A weight tensor's std x sqrt(fan-in), or None for one of fewer than two axes (a bias, a norm's scale).

    fan-in by the hook's layout: Keras (``weights/<path>``) stores a kernel ``(*kernel, in, out)``, PyTorch
    ``(out, in, *kernel)``."""
    shape = np.shape(value)
    if len(shape) < 2:
        return None
    fan_in = int(np.prod(shape[:-1])) if name.startswith("weights/") else int(np.prod(shape[1:]))
    return float(np.std(np.asarray(value, dtype=np.float64)) * math.sqrt(fan_in))


class InitialLossTooHigh(BuiltinRule):
    """Fires when the first training loss exceeds ``any_init_factor`` x the loss of an untrained classifier,
    or ``factor`` x it with weights beyond any standard initialisation; a squared error above
    ``squared_error_factor`` x its targets' mean square with such weights (above ``squared_error_any_factor``,
    when set, whatever the weights).

    Examples
    --------
    >>> # invoke_rule(InitialLossTooHigh(trial, num_classes="10"))
    """

    LIKELY_CAUSE = (
        "the first training loss of {tensor} is far above chance (ln C; a squared error: the targets' mean "
        "square): the model starts confident and wrong, weights initialised at too large a scale or inputs "
        "not normalised"
    )
    SUGGESTED_FIX = (
        "use the framework's default (or He/Glorot) initialisation without extra scaling, normalise the "
        "inputs, and check that the first loss is about ln(number of classes) (a squared error: about the "
        "targets' mean square, with the output layer at its default initialisation)"
    )

    PARAMETERS = (
        TENSOR_REGEX,
        Param(
            "factor",
            "float",
            "1.4",
            "fires when the first losses' mean exceeds factor x the chance level and the weights' scale "
            "exceeds init_scale",
        ),
        Param(
            "any_init_factor",
            "float",
            "8",
            "fires when the first losses' mean exceeds any_init_factor x the chance level, whatever the "
            "weights",
        ),
        Param(
            "init_scale",
            "float",
            "3",
            "the median over the step's weight tensors of std x sqrt(fan-in) above which no standard "
            "initialisation made them (He: 1.41)",
        ),
        Param(
            "scale_exclude_regex",
            "regex",
            EMBEDDING,
            "weights (re.match) left out of the weights' scale: embeddings (a lookup, fan-in 1)",
        ),
        Param("steps", "int", "1", "how many first saved TRAIN losses are averaged (Karpathy: the first)"),
        Param("num_classes", "int", None, "C: the chance level is ln(C); unset: read from the trial"),
        Param(
            "chance_loss", "float", None, "the chance level itself (any loss, e.g. an MSE's target variance)"
        ),
        Param(
            "squared_error_regex",
            "regex",
            SQUARED_ERROR,
            "losses (re.match) judged against their targets' mean square (<Loss>_input_1)",
        ),
        Param(
            "squared_error_factor",
            "float",
            "2",
            "fires when a squared-error loss exceeds this x its targets' mean square and the weights' scale "
            "exceeds init_scale (2: untrained outputs as loud as the targets)",
        ),
        Param(
            "squared_error_any_factor",
            "float",
            None,
            "fires when a squared-error loss exceeds this x its targets' mean square, whatever the weights "
            "(unset: off; that level depends on the targets' units)",
        ),
    )

    COLLECTIONS = (
        ("losses", {"save_interval": "500"}),
        ("gradients", {"save_interval": "500"}),
        ("weights", {"save_interval": "500"}),
        (
            "loss_inputs",
            {"include_regex": "[Ll]oss_input_[01]$|^predictions$|^batch_loss/", "save_interval": "500"},
        ),
    )

    def check_params(self) -> None:
        self.require_at_least(1, "steps")
        self.require_at_least(2, "num_classes")
        self.require_at_least(0, "init_scale")
        for name in ("factor", "any_init_factor", "squared_error_factor", "squared_error_any_factor"):
            if getattr(self, name) is not None and not getattr(self, name) > 1:
                raise self.param_error(name, f"value {getattr(self, name)} must be > 1 (1 is chance itself)")
        if self.chance_loss is not None and not (self.chance_loss > 0 and math.isfinite(self.chance_loss)):
            raise self.param_error("chance_loss", f"value {self.chance_loss} must be a finite number > 0")

    def history_steps(self) -> int:
        return 0  # the first losses are the run's leading steps (below), never the recent window

    def leading_steps(self) -> int:
        # the first ``steps`` saved TRAIN losses, validation steps interleaved (a pass per epoch)
        return 4 * self.steps + 4

    def invoke_at_step(self, step: int) -> bool:
        mode = self.step_mode(step)
        if mode not in (TRAIN, GLOBAL):
            return False
        for name in loss_names(self, batch_losses=True):
            saved = self.same_mode_steps(name, step, mode)
            if len(saved) != self.steps or saved[-1] != step:
                continue  # judged once: at the ``steps``-th saved loss of the mode
            if (saved[0] if mode == GLOBAL else self.base_trial.mode_step(saved[0])) != 0:
                continue  # the first loss the trial holds is not the first step's (a window of a long run)
            values = [self.scalar(name, s) for s in saved]
            if any(v is None or not math.isfinite(v) for v in values):
                continue  # a non-finite loss is ExplodingTensor's finding
            if self._read_from_targets(name) and self.squared_error_any_factor is None:
                scale = self.weights_scale(saved[0])
                if scale is None or scale[0] <= self.init_scale:
                    continue  # standard (or no) weights: no squared-error finding, so no target to read
            chance = self._chance(name, saved[0])
            if chance is None:
                continue
            level, why = chance
            first = float(np.mean(values))
            verdict = self._verdict(name, first, level, saved[0])
            if verdict is not None:
                factor, because = verdict
                which = "first loss" if self.steps == 1 else f"mean of the first {self.steps} losses"
                self.report_issue(
                    f"{name} ({mode.name}): {which} {self.fmt(first)} is {self.fmt(first / level)}x the "
                    f"chance level {self.fmt(level)} ({why}) (> {because})",
                    tensor=name,
                    value=first,
                    threshold=factor * level,
                )
                return True
        return False

    def _verdict(self, name: str, first: float, level: float, step: int) -> tuple[float, str] | None:
        """``(factor exceeded, why it applies)`` when ``first`` is too high a start, else None.

        The same two tiers for both: a squared error (its level read from the targets) by
        ``squared_error_any_factor`` alone (when set), or ``squared_error_factor`` when the weights saved at
        ``step`` are beyond any standard initialisation; a cross-entropy (or a given level) by
        ``any_init_factor`` alone, or ``factor`` with those weights."""
        if self._read_from_targets(name):
            tiers = ("squared_error_any_factor", "squared_error_factor")
        else:
            tiers = ("any_init_factor", "factor")
        any_factor, factor = (getattr(self, t) for t in tiers)
        if any_factor is not None and first > any_factor * level:
            return any_factor, f"{tiers[0]} {self.fmt(any_factor)}"
        if first <= factor * level:
            return None
        scale = self.weights_scale(step)
        if scale is None or scale[0] <= self.init_scale:
            return None  # a standard initialisation's start (He's output layer) or no weights to tell
        median, tensors = scale
        return factor, (
            f"{tiers[1]} {self.fmt(factor)}, with weights beyond any standard initialisation: their median "
            f"std x sqrt(fan-in) {self.fmt(median)} over {tensors} tensors > init_scale "
            f"{self.fmt(self.init_scale)}"
        )

    def weights_scale(self, step: int) -> tuple[float, int] | None:
        """``(median std x sqrt(fan-in), how many tensors)`` over the weights saved at ``step``: each of two
        or more axes, embeddings (``scale_exclude_regex``) left out; None when the step saved none."""
        scales = []
        for tensor in self.names_at(step, ["weights"]):
            if self.scale_exclude_regex.match(tensor):
                continue
            value = self.value(tensor, step)
            scale = weight_scale(tensor, value) if value is not None else None
            if scale is not None and math.isfinite(scale):
                scales.append(scale)
        return (float(np.median(scales)), len(scales)) if scales else None

    def _chance(self, name: str, step: int) -> tuple[float, str] | None:
        """``(chance level, how it was found)`` for loss ``name``, or None when it has none."""
        if self.chance_loss is not None:
            return self.chance_loss, "chance_loss"
        if self.num_classes is not None:
            return math.log(self.num_classes), f"ln {self.num_classes}, num_classes"
        if self._read_from_targets(name):
            return squared_error_chance(self, name, step)
        if BINARY_CROSS_ENTROPY.match(name):
            return math.log(2), "ln 2, a binary cross-entropy"
        if CROSS_ENTROPY.match(name):
            classes = self._output_width(name, step)
            if classes is not None and classes >= 2:
                return math.log(classes), f"ln {classes}: {classes} classes, the width of the output layer"
        return None

    def _read_from_targets(self, name: str) -> bool:
        """Whether loss ``name``'s chance level is its targets' mean square (a squared-error loss, with no
        ``chance_loss`` or ``num_classes`` given)."""
        return (
            self.chance_loss is None
            and self.num_classes is None
            and bool(self.squared_error_regex.match(name))
        )

    def _output_width(self, loss: str, step: int) -> int | None:
        return output_width(self, loss, step)


def output_width(rule: BuiltinRule, loss: str, step: int) -> int | None:
    """The number of classes a cross-entropy ``loss`` saved at ``step`` is over, read by ``rule``: the leading
    dimension of the first gradient saved after ``loss`` at ``step`` (the output layer's: backward starts at
    the loss); None when the trial cannot tell the order or saved none. A Keras batch loss: the class axis
    (the last) of the ``predictions`` saved at ``step``."""
    feed = loss_feed(loss)
    if feed is not None and feed.class_axis == -1:
        if feed.prediction not in rule.base_trial.tensor_names(step=step):
            return None
        value = rule.value(feed.prediction, step)
        return int(value.shape[-1]) if value is not None and value.ndim >= 2 else None
    saved_order = getattr(rule.base_trial, "saved_order", None)
    if saved_order is None:
        return None
    grads = set(rule.names_at(step, ["gradients"]))
    seen_loss = False
    for tensor in saved_order(step):
        if tensor == loss:
            seen_loss = True
        elif seen_loss and tensor in grads:
            value = rule.value(tensor, step)
            return int(value.shape[0]) if value is not None and value.ndim >= 1 else None
    return None

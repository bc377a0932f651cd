"""InitialLossTooHigh: the first training loss is far above what an untrained classifier scores.

Published criterion: "verify loss @ init" (A. Karpathy, "A Recipe for Training Neural Networks",
2019): a classifier whose weights are initialised well outputs near-uniform probabilities, so its first
cross-entropy is about ln(C) for C classes (ln 2 per output of a sigmoid/BCE classifier). A first loss
many times higher means confident wrong outputs before any training: weights initialised at too large a
scale (DeepFD's initialisation mutant) or unnormalised inputs.

Reading: the mean of the first ``steps`` losses saved in TRAIN mode (GLOBAL for a trial saved without
modes), the first of them at the mode's step 0, is judged once, at the last of them; the rule fires when
it exceeds ``factor`` x the chance level. A trial whose first saved loss is a later step's (a save
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
4. for a squared-error loss (``squared_error_regex``: PyTorch's ``MSELoss`` unless set), the mean square of
   the targets the loss was computed against at that step (``<Loss>_input_1``): the loss of predicting
   zero, what an untrained, well-initialised regression head outputs
   (:mod:`tornasole.rules.builtin.squared_error_chance` says why not the targets' variance). It is judged
   with its own ``squared_error_factor``, when set: the first loss is 1 + E[y^2]/E[t^2] times it for untrained
   outputs y uncorrelated with the targets t, so 4 means outputs whose root mean square exceeds sqrt(3) x
   the targets'. A run that saved no target is not judged, and the step says which tensor is missing.

Why 4 (designed on the families benchmark's ``regression``, judged on ``autoencoder``): first loss /
E[t^2] is 0.98-1.22 on the regression family's built-healthy runs and 5.8-8.6 at initialisation x8 (its
BatchNorm absorbs all but the output layer's scale); 0.75-0.85 on the autoencoder's healthy runs (a sigmoid
output starts at 0.5) and 1.7-1.8 at x8 (a sigmoid bounds the loss). Over 200 seeds each of that
regression model and of a plain ReLU MLP, the ratio exceeds 4 in none at PyTorch's default
initialisation, in 0-0.5% with He on the hidden layers and a default output layer, in 0-3.5% with Glorot
on every layer (Keras's default), in 6-22% with He on every layer, and in 92-100% at x8 (first batches
of 16; with batches of 4, noisier: up to 12% with Glorot, 26% with He). An output layer
initialised for a ReLU's input gives outputs larger than the targets: a start the criterion is about
(Karpathy: initialise the last layer for the targets' scale), though such a run trains normally; set
``squared_error_factor`` higher (8) for it.

Hence the squared-error check is opt-in: ``squared_error_factor`` is unset by default, and the recommended
set leaves it so. Its cost on healthy starts the benchmark does not hold (He on every layer is a common
loop over ``nn.Linear``; Glorot everywhere is Keras's default) is an alarm rate no default may carry; a
user who initialises the output layer for the targets' scale sets it to 4.

A loss with no chance level (a Keras ``loss`` with no ``num_classes``, an MSE that saved no target)
is not judged. Why not judge the weights' scale instead (each 2-D weight's std x sqrt(fan-in) is
0.58-0.71 at PyTorch's default initialisation and 4.6-5.7 at x8 in the families benchmark): a model
fine-tuned from pretrained weights starts from a scale no initialisation describes. Its first loss,
though, is at or below chance, never above: this criterion is safe for fine-tuning.
"""

from __future__ import annotations

import math

import numpy as np

from tornasole.modes import GLOBAL, TRAIN
from tornasole.rules.builtin.base import TENSOR_REGEX, BuiltinRule
from tornasole.rules.builtin.losses import BINARY_CROSS_ENTROPY, CROSS_ENTROPY, loss_feed, loss_names
from tornasole.rules.builtin.squared_error_chance import SQUARED_ERROR, squared_error_chance
from tornasole.rules.params import Param

__all__ = ["InitialLossTooHigh", "CROSS_ENTROPY", "BINARY_CROSS_ENTROPY"]


class InitialLossTooHigh(BuiltinRule):
    """Fires when the first training loss exceeds ``factor`` x the loss of an untrained classifier.

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
            "factor", "float", "1.4", "fires when the first losses' mean exceeds factor x the chance level"
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
            None,
            "fires when a squared-error loss exceeds this x its targets' mean square (unset: not judged; 4)",
        ),
    )

    COLLECTIONS = (
        ("losses", {"save_interval": "500"}),
        ("gradients", {"save_interval": "500"}),
        (
            "loss_inputs",
            {"include_regex": "[Ll]oss_input_[01]$|^predictions$|^batch_loss/", "save_interval": "500"},
        ),
    )

    def check_params(self) -> None:
        self.require_at_least(1, "steps")
        self.require_at_least(2, "num_classes")
        for name in ("factor", "squared_error_factor"):
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
            chance = self._chance(name, saved[0])
            if chance is None:
                continue
            level, why = chance
            factor = self.squared_error_factor if self._read_from_targets(name) else self.factor
            first = float(np.mean(values))
            if first > factor * level:
                which = "first loss" if self.steps == 1 else f"mean of the first {self.steps} losses"
                self.report_issue(
                    f"{name} ({mode.name}): {which} {self.fmt(first)} is {self.fmt(first / level)}x the "
                    f"chance level {self.fmt(level)} ({why}) (> factor {self.fmt(factor)})",
                    tensor=name,
                    value=first,
                    threshold=factor * level,
                )
                return True
        return False

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
        """Whether loss ``name``'s chance level is its targets' mean square (a squared-error loss, judged
        because ``squared_error_factor`` is set, with no ``chance_loss`` or ``num_classes`` given)."""
        return (
            self.squared_error_factor is not None
            and self.chance_loss is None
            and self.num_classes is None
            and bool(self.squared_error_regex.match(name))
        )

    def _output_width(self, loss: str, step: int) -> int | None:
        """The leading dimension of the first gradient saved after ``loss`` at ``step`` (the output layer's:
        backward starts at the loss); None when the trial cannot tell the order or saved none. A Keras
        batch loss: the class axis (the last) of the ``predictions`` saved at ``step``."""
        feed = loss_feed(loss)
        if feed is not None and feed.class_axis == -1:
            if feed.prediction not in self.base_trial.tensor_names(step=step):
                return None
            value = self.value(feed.prediction, step)
            return int(value.shape[-1]) if value is not None and value.ndim >= 2 else None
        saved_order = getattr(self.base_trial, "saved_order", None)
        if saved_order is None:
            return None
        grads = set(self.names_at(step, ["gradients"]))
        seen_loss = False
        for tensor in saved_order(step):
            if tensor == loss:
                seen_loss = True
            elif seen_loss and tensor in grads:
                value = self.value(tensor, step)
                return int(value.shape[0]) if value is not None and value.ndim >= 1 else None
        return None

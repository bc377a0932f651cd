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
   last axis of the ``predictions`` saved with it; :mod:`tornasole.rules.builtin.losses`).

A loss with no chance level (an MSE with no ``chance_loss``, a Keras ``loss`` with no ``num_classes``)
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
from tornasole.rules.params import Param

__all__ = ["InitialLossTooHigh", "CROSS_ENTROPY", "BINARY_CROSS_ENTROPY"]


class InitialLossTooHigh(BuiltinRule):
    """Fires when the first training loss exceeds ``factor`` x the loss of an untrained classifier.

    Examples
    --------
    >>> # invoke_rule(InitialLossTooHigh(trial, num_classes="10"))
    """

    LIKELY_CAUSE = (
        "the first training loss of {tensor} is far above chance (ln C): the model starts confident and "
        "wrong, weights initialised at too large a scale or inputs not normalised"
    )
    SUGGESTED_FIX = (
        "use the framework's default (or He/Glorot) initialisation without extra scaling, normalise the "
        "inputs, and check that the first loss is about ln(number of classes)"
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
    )

    COLLECTIONS = (
        ("losses", {"save_interval": "500"}),
        ("gradients", {"save_interval": "500"}),
        ("loss_inputs", {"include_regex": "^predictions$|^batch_loss/", "save_interval": "500"}),  # Keras
    )

    def check_params(self) -> None:
        self.require_at_least(1, "steps")
        self.require_at_least(2, "num_classes")
        if self.factor <= 1:
            raise self.param_error("factor", f"value {self.factor} must be > 1 (1 is chance itself)")
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
            first = float(np.mean(values))
            if first > self.factor * level:
                which = "first loss" if self.steps == 1 else f"mean of the first {self.steps} losses"
                self.report_issue(
                    f"{name} ({mode.name}): {which} {self.fmt(first)} is {self.fmt(first / level)}x the "
                    f"chance level {self.fmt(level)} ({why}) (> factor {self.fmt(self.factor)})",
                    tensor=name,
                    value=first,
                    threshold=self.factor * level,
                )
                return True
        return False

    def _chance(self, name: str, step: int) -> tuple[float, str] | None:
        """``(chance level, how it was found)`` for loss ``name``, or None when it has none."""
        if self.chance_loss is not None:
            return self.chance_loss, "chance_loss"
        if self.num_classes is not None:
            return math.log(self.num_classes), f"ln {self.num_classes}, num_classes"
        if BINARY_CROSS_ENTROPY.match(name):
            return math.log(2), "ln 2, a binary cross-entropy"
        if CROSS_ENTROPY.match(name):
            classes = self._output_width(name, step)
            if classes is not None and classes >= 2:
                return math.log(classes), f"ln {classes}: {classes} classes, the width of the output layer"
        return None

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

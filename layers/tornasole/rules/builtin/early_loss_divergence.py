"""EarlyLossDivergence: early in training, the training loss climbed far above where it started.

Published criteria. Y. Bengio, "Practical Recommendations for Gradient-Based Training of Deep
Architectures" (2012), section 3.1: the learning rate is too large when the training criterion diverges,
i.e. *increases* instead of falling, at the start of training ("try again with a 3 times smaller learning
rate"); the learning-rate range test (L. Smith, "Cyclical Learning Rates for Training Neural Networks",
WACV'17, section 3.3) reads the same sign, the loss rising instead of falling, as the rate past its upper
bound. Where training starts: a classifier initialised well outputs near-uniform probabilities, so its first
cross-entropy is about ln C (A. Karpathy, "A Recipe for Training Neural Networks", 2019, "verify loss @
init"). A cross-entropy that climbs to ``factor`` times that start means the optimiser made the model
confidently wrong, worse than untrained: the steps overshoot.

Why a rule of its own. An adaptive optimiser at a rate far too high (AdamW at 100x: ``lr`` 0.2 on a
pre-LayerNorm residual MLP) moves every weight by about ``lr`` per step whatever the gradient, so the loss
jumps to 2x chance within a few steps, sits at chance for epochs and then partly recovers. Nothing else
reads that: the loss falls from its peak (LossNotDecreasing), never reaches Megatron-LM's 10x or
OLMo-core's z-score (LossSpike, judged against the run's own early losses, the peak among them),
DeepDiagnosis's ``lr * ||dW|| / ||W||`` and UMLAUT's ``lr > 0.01`` need the rate, which such a run need not
save (UMLAUT's also cannot tell Adam at 0.02 from SGD at 0.1), and WeightUpdateRatio's ``||dW|| / ||W||``
between saved steps reaches 4.5 over the first four steps (``resmlp``: 1.1 of the weights' norm a step while
the warmup is at 0.1), then 0.03-0.17 a step, below its large-ratio bound (10, SageMaker's).

Reading: each loss of a known chance level (a cross-entropy the trial says the kind of: PyTorch's
``CrossEntropyLoss``/``NLLLoss`` and Keras's categorical cross-entropies, ln C with C the output layer's
width, read as InitialLossTooHigh reads it; binary cross-entropies, ln 2; or ``num_classes`` /
``chance_loss`` given), in TRAIN mode. The start is the larger of the chance level and the loss saved at the
mode's step 0 (a He- or Glorot-initialised output layer starts above chance, and that start is not a rise).
A divergence is a saved TRAIN loss among the first ``within_steps`` after step 0 above ``factor`` x the
start. With ``confirm_by_validation`` (the default) the rule then waits for the validation pass after it and
fires at the first saved TRAIN step after that pass when the pass's mean loss is still at or above the chance
level (Karpathy's baseline: the model is no better than untrained), so a run that climbs and recovers within
its first epoch is not judged a fault; without it, it fires at the divergence. A trial whose first saved loss
is a later step's (the evaluator's window of a long run) is not judged, nor a trial without modes when
confirming (it has no validation pass), nor non-finite losses (ExplodingTensor's finding) and squared errors
(their level moves with the targets' units, and a healthy regression's noisy first batches reach 2.7x its
first loss on the families benchmark). The serverless evaluator loads the run's first
8 x (``within_steps`` + 1) + 8 saved steps for it: where the first ``within_steps`` saved TRAIN steps and the
validation passes between them are more saved steps than that (passes of dozens of saved batches), the
evaluator sees part of a pass and can differ from ``invoke_rule`` over the whole trial.

Designed on the families benchmark's ``resmlp`` (x100: 2.08x and 2.19x its start at the second saved step,
the first validation pass at 1.13x and 1.03x chance, healthy 0.35x; healthy runs and hard negatives at most
1.35x their start). Where it
misleads: a run that diverges at the start and still trains, slowly (``bench/detection``'s one sigmoid layer
under SGD 0.5 with momentum 0.9 climbs to 2-4.5x ln 2 and sits at chance through its first validation pass,
then reaches accuracy 1.0): from the loss alone, early, it looks like a harmful run (docs/RULES.md, why the
rule is not in the recommended set).
"""

from __future__ import annotations

import math

from tornasole.modes import EVAL, GLOBAL, TRAIN
from tornasole.rules.builtin.base import TENSOR_REGEX, BuiltinRule
from tornasole.rules.builtin.initial_loss_too_high import output_width
from tornasole.rules.builtin.losses import BINARY_CROSS_ENTROPY, CROSS_ENTROPY, loss_names
from tornasole.rules.params import Param

__all__ = ["EarlyLossDivergence"]


class EarlyLossDivergence(BuiltinRule):
    """Fires when, within the first ``within_steps`` saved training steps, a cross-entropy loss climbs above
    ``factor`` x its start (the larger of ln C and the first saved loss) and the validation pass that
    follows is still no better than chance (unless ``confirm_by_validation`` is False).

    Examples
    --------
    >>> # invoke_rule(EarlyLossDivergence(trial, factor="2", within_steps="20"))
    """

    LIKELY_CAUSE = (
        "the training loss of {tensor} climbed far above where it started (chance, ln C) in the first steps "
        "and the model is still no better than chance: the learning rate is too high, the optimiser's steps "
        "overshoot"
    )
    SUGGESTED_FIX = (
        "lower the learning rate about 10x (for Adam/AdamW try 1e-3 or below) or add a warmup, then check "
        "that the loss falls from ln(number of classes) in the first steps"
    )

    PARAMETERS = (
        TENSOR_REGEX,
        Param(
            "factor",
            "float",
            "2",
            "a training loss above factor x the start (the larger of the chance level and the first loss) "
            "is a divergence",
        ),
        Param(
            "within_steps",
            "int",
            "20",
            "how many saved TRAIN losses after step 0 are judged (the start of training)",
        ),
        Param(
            "confirm_by_validation",
            "bool",
            "True",
            "fire only when the validation pass after the divergence has a mean loss at or above the chance "
            "level (the model stayed no better than untrained); False: fire at the divergence",
        ),
        Param("num_classes", "int", None, "C: the chance level is ln(C); unset: read from the trial"),
        Param("chance_loss", "float", None, "the chance level itself (any loss)"),
    )

    COLLECTIONS = (
        ("losses", {"save_interval": "1"}),
        ("gradients", {"save_interval": "500"}),
        ("loss_inputs", {"include_regex": "^predictions$|^batch_loss/", "save_interval": "1"}),
    )

    def check_params(self) -> None:
        self.require_at_least(1, "within_steps")
        self.require_at_least(2, "num_classes")
        if not self.factor > 1:
            raise self.param_error("factor", f"value {self.factor} must be > 1 (1 is the start itself)")
        if self.chance_loss is not None and not (self.chance_loss > 0 and math.isfinite(self.chance_loss)):
            raise self.param_error("chance_loss", f"value {self.chance_loss} must be a finite number > 0")

    def history_steps(self) -> int:
        return 0  # the judged losses are the run's leading steps (below), never the recent window

    def leading_steps(self) -> int:
        # the first ``within_steps`` + 1 saved TRAIN losses with the validation passes between them
        return 8 * (self.within_steps + 1) + 8

    def invoke_at_step(self, step: int) -> bool:
        mode = self.step_mode(step)
        if mode not in (TRAIN, GLOBAL) or (mode == GLOBAL and self.confirm_by_validation):
            return False  # a trial without modes has no validation pass to confirm with
        for name in loss_names(self, batch_losses=True):
            saved = self.same_mode_steps(name, step, mode)
            if not 2 <= len(saved) <= self.within_steps + 1 or saved[-1] != step:
                continue  # judged at the first ``within_steps`` saved losses after the first
            if (saved[0] if mode == GLOBAL else self.base_trial.mode_step(saved[0])) != 0:
                continue  # the first loss the trial holds is not the first step's (a window of a long run)
            losses = [self.scalar(name, s) for s in saved]
            first = losses[0]
            if first is None or not math.isfinite(first):
                continue
            chance = self._chance(name, saved[0])
            if chance is None:
                continue
            level, why = chance
            start = max(level, first)
            diverged = next(
                (
                    i
                    for i, v in enumerate(losses[1:], start=1)
                    if v is not None and math.isfinite(v) and v > self.factor * start
                ),
                None,
            )  # a non-finite loss is ExplodingTensor's finding
            if diverged is None:
                continue
            found = (
                f"{name} ({mode.name}): {self.fmt(losses[diverged])} at step {saved[diverged]} (saved TRAIN "
                f"step {diverged}) is {self.fmt(losses[diverged] / start)}x its start {self.fmt(start)} (the "
                f"larger of the first loss {self.fmt(first)} and the chance level {self.fmt(level)}, {why}) "
                f"> factor {self.fmt(self.factor)}"
            )
            if not self.confirm_by_validation:
                if diverged != len(saved) - 1:
                    continue  # judged once, at the divergence
                self.report_issue(found, tensor=name, value=losses[diverged], threshold=self.factor * start)
                return True
            confirmed = self._pass_after(name, saved, diverged, step)
            if confirmed is None or confirmed < level:
                continue
            self.report_issue(
                f"{found}, and the validation pass after it is no better than chance: mean "
                f"{self.fmt(confirmed)} >= {self.fmt(level)}",
                tensor=name,
                value=losses[diverged],
                threshold=self.factor * start,
            )
            return True
        return False

    def _pass_after(self, name: str, saved: list[int], diverged: int, step: int) -> float | None:
        """The mean loss of the first validation pass after the divergence at ``saved[diverged]``, when
        ``step`` (the newest saved TRAIN step) is the first saved TRAIN step after that pass; else None (no
        pass yet, judged already, or a pass with no finite loss)."""
        evals = [s for s in self.same_mode_steps(name, step, EVAL) if s > saved[diverged]]
        if not evals or evals[0] < saved[-2]:
            return None  # no pass after the divergence, or it was judged at an earlier TRAIN step
        values = [self.scalar(name, s) for s in evals]
        finite = [v for v in values if v is not None and math.isfinite(v)]
        return sum(finite) / len(finite) if finite else None

    def _chance(self, name: str, step: int) -> tuple[float, str] | None:
        """``(chance level, how it was found)`` for loss ``name``, or None (not a cross-entropy, or one whose
        class count the trial does not tell)."""
        if self.chance_loss is not None:
            return self.chance_loss, "chance_loss"
        if self.num_classes is not None:
            return math.log(self.num_classes), f"ln {self.num_classes}, num_classes"
        if BINARY_CROSS_ENTROPY.match(name):
            return math.log(2), "ln 2, a binary cross-entropy"
        if CROSS_ENTROPY.match(name):
            classes = output_width(self, name, step)
            if classes is not None and classes >= 2:
                return math.log(classes), f"ln {classes}: {classes} classes, the width of the output layer"
        return None

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
width, read as InitialLossTooHigh reads it; binary cross-entropies, ln 2; or ``num_classes`` / ``chance_loss``
given), in TRAIN mode. The start is the larger of the chance level and the loss saved at the mode's step 0 (a
He- or Glorot-initialised output layer starts above chance, and that start is not a rise). A divergence is a
saved TRAIN loss among the first ``within_steps`` after step 0 above ``factor`` x the start. With
``confirm_by_validation`` (the default) the rule then reads the validation passes after it (a pass: the EVAL
steps between two saved TRAIN steps) and fires at the first saved TRAIN step after the (1 +
``stalled_passes``)-th of them when the first pass's mean loss is still at or above the chance level
(Karpathy's baseline: the model is no better than untrained) and each later one lies within
``chance_tolerance`` (5 %) of it: the model *stalled at chance*. Why the stall. Bengio's divergence says the
rate is too high; whether it harmed the run is whether the model then learns. A network whose predictions no
longer depend on its input outputs a constant distribution ``p``, whose cross-entropy on balanced classes is
ln C + KL(u || p): at chance, or just above it, pass after pass. A network that learns comes below ln C (its
predictions carry information about the label), and one still far above chance is confidently wrong and still
moving: `bench/detection`'s one sigmoid layer under SGD 0.5 with momentum 0.9 climbs to 2-4.5x ln 2, is at
1.0-2.6x chance at its first pass, then 0.92x (below) or 1.74x and 2.89x (far above) at its second, and trains
to accuracy 0.97-1.0; resmlp's AdamW x100 sits at 1.006x and 1.038x chance at its second pass and recovers
only partly (accuracy 0.57 and 0.70 against 0.97). ``stalled_passes=0`` is the first pass alone (this rule's
first criterion), which alarms on those survivors. What the stall misses: a run still far above chance at its
second pass (AdamW at ``lr`` 1.0 on a small LayerNorm net: 9.5x, 7.0x, then 1.1x chance), which is not judged
a stall. Without confirmation it fires at the divergence. A trial whose first saved loss is a later step's
(the evaluator's window of a long run) is not judged, nor a trial without modes when confirming (it has no
validation pass), nor non-finite losses (ExplodingTensor's finding) and squared errors (their level moves with
the targets' units, and a healthy regression's noisy first batches reach 2.7x its first loss on the families
benchmark). The serverless evaluator loads the run's first 8 x (``within_steps`` + 1) + 8 x (1 +
``stalled_passes``) saved steps for it, at most its cap of 64: where the first ``within_steps`` saved TRAIN
steps and the passes that decide are more saved steps than that (passes of dozens of saved batches), the
evaluator sees part of them and can differ from ``invoke_rule`` over the whole trial.

Designed on the families benchmark's ``resmlp`` (x100: 2.08x and 2.19x its start at the second saved step,
the first validation pass at 1.13x and 1.04x chance, the second at 1.006x and 1.038x; healthy 0.35x; healthy
runs and hard negatives at most 1.35x their start) and, for the stall, on ``bench/detection``'s cal and dev
splits (the survivors above) and the families' built-healthy runs: ``chance_tolerance`` 0.05 lies between
resmlp's second passes (within 3.8 %) and the nearest survivor's (8 % below chance). Where it misleads: a run
that stalls at chance for an epoch after the divergence and then trains would alarm (docs/RULES.md).
"""

from __future__ import annotations

import math
from bisect import bisect_right

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
        Param(
            "stalled_passes",
            "int",
            "1",
            "with confirm_by_validation: how many validation passes after the confirming one must also sit "
            "at chance (a mean within chance_tolerance of it: the model stalled); 0: that pass alone",
        ),
        Param(
            "chance_tolerance",
            "float",
            "0.05",
            "a pass mean within this fraction of the chance level sits at chance (stalled_passes)",
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
        self.require_at_least(0, "stalled_passes")
        if not 0 < self.chance_tolerance < 1:
            raise self.param_error("chance_tolerance", f"value {self.chance_tolerance} must be in (0, 1)")
        if not self.factor > 1:
            raise self.param_error("factor", f"value {self.factor} must be > 1 (1 is the start itself)")
        if self.chance_loss is not None and not (self.chance_loss > 0 and math.isfinite(self.chance_loss)):
            raise self.param_error("chance_loss", f"value {self.chance_loss} must be a finite number > 0")

    def history_steps(self) -> int:
        return 0  # the judged losses are the run's leading steps (below), never the recent window

    def leading_steps(self) -> int:
        # the first ``within_steps`` + 1 saved TRAIN losses with the validation passes between them, and the
        # passes that confirm a divergence (each counted as 8 saved steps)
        return 8 * (self.within_steps + 1) + 8 * (1 + self.stalled_passes)

    def invoke_at_step(self, step: int) -> bool:
        mode = self.step_mode(step)
        if mode not in (TRAIN, GLOBAL) or (mode == GLOBAL and self.confirm_by_validation):
            return False  # a trial without modes has no validation pass to confirm with
        settled = self.__dict__.setdefault("_settled", set())
        for name in loss_names(self, batch_losses=True):
            if name in settled:
                continue
            saved = self.same_mode_steps(name, step, mode)
            if len(saved) < 2 or saved[-1] != step:
                continue
            if (saved[0] if mode == GLOBAL else self.base_trial.mode_step(saved[0])) != 0:
                settled.add(
                    name
                )  # the first loss the trial holds is not the first step's (a window of a long run)
                continue
            found = self._divergence(name, saved[: self.within_steps + 1])
            if found is None:
                if len(saved) > self.within_steps:
                    settled.add(name)  # every judged loss was seen: no divergence
                continue
            diverged, value, threshold, text = found
            if not self.confirm_by_validation:
                if diverged == len(saved) - 1:
                    settled.add(name)
                    self.report_issue(text, tensor=name, value=value, threshold=threshold)
                    return True
                if diverged < len(saved) - 1:
                    settled.add(name)
                continue
            passes = self._passes_after(name, saved, diverged, step)
            if passes is None:
                continue  # not the first TRAIN step after the pass that decides
            if not passes:
                settled.add(name)  # that step is past: judged already
                continue
            settled.add(name)  # judged once, at the first TRAIN step after the deciding pass
            level = self._chance(name, saved[0])[0]
            first, *later = passes
            if first is None or first < level:
                continue  # the model is better than chance by the first pass after the divergence
            if any(m is None or abs(m - level) > self.chance_tolerance * level for m in later):
                continue  # it left chance: it learns (below) or is still moving (far above)
            why = (
                f", and the validation pass after it is no better than chance: mean {self.fmt(first)} >= "
                f"{self.fmt(level)}"
            )
            if later:
                why += (
                    f", and the {len(later)} pass(es) after that sat at chance (means "
                    f"{', '.join(self.fmt(m) for m in later)}, within "
                    f"{self.fmt(100 * self.chance_tolerance)} % of {self.fmt(level)}): the model stalled"
                )
            self.report_issue(text + why, tensor=name, value=value, threshold=threshold)
            return True
        return False

    def _divergence(self, name: str, saved: list[int]) -> tuple[int, float, float, str] | None:
        """``(index in saved, loss, factor x start, what was found)`` of the first judged TRAIN loss above
        ``factor`` x its start, or None (none, or no chance level / no finite first loss)."""
        losses = [self.scalar(name, s) for s in saved]
        first = losses[0]
        if first is None or not math.isfinite(first):
            return None
        chance = self._chance(name, saved[0])
        if chance is None:
            return None
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
            return None
        mode = self.step_mode(saved[0])
        text = (
            f"{name} ({mode.name}): {self.fmt(losses[diverged])} at step {saved[diverged]} (saved TRAIN "
            f"step {diverged}) is {self.fmt(losses[diverged] / start)}x its start {self.fmt(start)} (the "
            f"larger of the first loss {self.fmt(first)} and the chance level {self.fmt(level)}, {why}) "
            f"> factor {self.fmt(self.factor)}"
        )
        return diverged, losses[diverged], self.factor * start, text

    def _passes_after(
        self, name: str, saved: list[int], diverged: int, step: int
    ) -> list[float | None] | None:
        """The mean losses of the first 1 + ``stalled_passes`` validation passes after the divergence at
        ``saved[diverged]`` when ``step`` (the newest saved TRAIN step) is the first saved TRAIN step after
        the last of them; None: not yet; []: judged already. A pass is the EVAL steps between two saved
        TRAIN steps; a pass with no finite loss has mean None."""
        evals = [s for s in self.same_mode_steps(name, step, EVAL) if s > saved[diverged]]
        groups: dict[int, list[int]] = {}
        for s in evals:
            groups.setdefault(bisect_right(saved, s), []).append(s)
        wanted = 1 + self.stalled_passes
        if len(groups) > wanted or (len(groups) == wanted and max(groups) != len(saved) - 1):
            return []  # the deciding pass was before the previous saved TRAIN step: judged then
        if len(groups) < wanted or max(groups) != len(saved) - 1:
            return None
        means: list[float | None] = []
        for key in sorted(groups):
            values = [self.scalar(name, s) for s in groups[key]]
            finite = [v for v in values if v is not None and math.isfinite(v)]
            means.append(sum(finite) / len(finite) if finite else None)
        return means

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

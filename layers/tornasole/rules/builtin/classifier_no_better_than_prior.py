"""ClassifierNoBetterThanPrior: after several validation passes, a cross-entropy classifier still does no
better than the null model that predicts the class frequencies, whatever its inputs.

Criterion: McFadden's pseudo-R^2 (McFadden 1974, "Conditional logit analysis of qualitative choice
behavior"), 1 - LL(model) / LL(null), where LL(null) is the log-likelihood of the null model that predicts
every sample's class with the observed class frequencies. In cross-entropy terms: 1 - CE / CE_null, CE the
model's pooled cross-entropy and CE_null the entropy of the class frequencies. 0 means the model's
predictions are worth no more than the class prior: Karpathy's input-independent baseline ("A Recipe for
Training Neural Networks", 2019), which a model must beat. It is the cross-entropy counterpart of
RegressionWorseThanMean's R^2, and the prior-aware form of AUTOTRAINER's slow convergence (maximum accuracy
below 0.6), which cannot see a model stuck at a majority class of 0.63.

Read from the trial, for each loss of kind binary cross-entropy or cross-entropy
(:data:`~tornasole.rules.builtin.losses.BINARY_CROSS_ENTROPY`,
:data:`~tornasole.rules.builtin.losses.CROSS_ENTROPY`) whose name ``loss_regex`` matches: its prediction
and target (:func:`~tornasole.rules.builtin.losses.loss_feeds`: PyTorch's ``<Loss>_input_0``/``_1``, Keras's
``predictions``/``labels``). The cross-entropy is computed **from the prediction and the target**, never
read from the saved loss: a ``reduction="sum"``, class weights or label smoothing change the loss's value,
not what the model predicts. The loss's kind says how to read the prediction:

* ``BCELoss`` and Keras's ``BinaryCrossentropy``: probabilities (clipped as the losses clip them: PyTorch
  floors the log at -100, Keras clips to [1e-7, 1 - 1e-7]); ``BCEWithLogitsLoss`` and ``_from_logits``:
  logits. Every output column is its own binary problem (multi-label), with its own null model;
* ``CrossEntropyLoss`` and ``_from_logits``: logits; ``NLLLoss``: log-probabilities; Keras's
  ``CategoricalCrossentropy``: probabilities (normalised over the class axis, then clipped, as Keras does).
  The target is class indices (one axis fewer than the prediction; PyTorch's default ``ignore_index`` -100
  left out) or a distribution over the classes (one-hot or soft, the prediction's shape). The class axis is
  1 in PyTorch, -1 in Keras; any further axes (a sequence) are more samples.

Points are validation passes (EVAL steps grouped by :func:`trial_phases`, each cut to the shortest pass's
length and the newest judged once, whole: :func:`whole_passes`). A pass pools its batches: CE over every
sample of every saved batch, CE_null the entropy of the whole pass's own class frequencies (per column for
a binary loss; columns of one class only are left out).

Fires at an EVAL step once there are ``min_passes`` passes when each of the newest ``consecutive`` passes
has pseudo-R^2 <= ``max_pseudo_r2``. Why patience: a slow starter (a warmup, a small learning rate) sits at
the prior for its first passes; why ``consecutive``: one bad pass of a noisy run is not a verdict.

With ``learning_z`` (off by default; 2 in the recommended set), a pass at or below the bound whose model is
leaving a plateau is not judged: its predictions tell their own labels better than the labels permuted
among the pass's samples, and that information at least doubles from the pass before, or, with
``learning_span`` (3 in the recommended set), within that many passes while the pass scores at least
``-max_pseudo_r2`` (a slow learner at chance, not a model far worse than the prior)
(:mod:`~tornasole.rules.builtin.plateau_learning`: the test, its source and why).

What stays quiet, and why:

* any classifier that beats the class prior by more than ``max_pseudo_r2`` of its entropy;
* a pass whose targets hold one class only: the prior predicts it perfectly (CE_null = 0), nothing to beat;
* a batch whose prediction and target do not match in shape, that holds a non-finite value, or whose
  targets are not valid for the loss (class ids out of range or not whole, soft targets outside [0, 1]):
  left out of its pass;
* squared-error losses (RegressionWorseThanMean judges them) and losses whose kind the name does not say.
"""

from __future__ import annotations

import numpy as np

from tornasole.rules.builtin.cross_entropies import (
    binary_cross_entropies,
    binary_null_entropy,
    binary_permutation_gains,
    categorical_cross_entropies,
    categorical_null_entropy,
    categorical_permutation_gains,
    cross_entropy_kind,
    permutation_z,
    pooled_pseudo_r2,
)
from tornasole.rules.builtin.losses import LossFeed
from tornasole.rules.builtin.pass_scores import PassScoreRule
from tornasole.rules.builtin.plateau_learning import (
    LEARNING_GROWTH,
    LEARNING_SPAN,
    LEARNING_Z,
    PlateauLearning,
)
from tornasole.rules.params import Param

# The cross-entropy readers are re-exported from here, where they were first defined.
__all__ = [
    "ClassifierNoBetterThanPrior",
    "binary_permutation_gains",
    "categorical_permutation_gains",
    "permutation_z",
    "binary_cross_entropies",
    "categorical_cross_entropies",
    "binary_null_entropy",
    "categorical_null_entropy",
    "cross_entropy_kind",
    "pooled_pseudo_r2",
]


class ClassifierNoBetterThanPrior(PlateauLearning, PassScoreRule):
    """Fires when a classifier's validation pseudo-R^2 is <= ``max_pseudo_r2`` in ``consecutive`` passes.

    Examples
    --------
    >>> # invoke_rule(ClassifierNoBetterThanPrior(trial, min_passes="4", max_pseudo_r2="0"))
    """

    LIKELY_CAUSE = (
        "{tensor}: the classifier predicts no better than the class frequencies on validation data after "
        "several epochs: labels misaligned with or shuffled against the inputs, inputs not reaching the "
        "model (all zeros, a wrong column), or a learning rate so low or high that nothing is learned; "
        "or a plateau the run will leave (a recurrent net can sit at chance for several epochs first)"
    )
    SUGGESTED_FIX = (
        "check that the data pipeline pairs each input with its own label (shuffle inputs and labels "
        "together) and feeds the model the intended features, then try the learning rate 10x lower and "
        "10x higher; for a recurrent net on long sequences whose pipeline checks out, a few more epochs "
        "first"
    )

    PARAMETERS = (
        Param(
            "loss_regex",
            "regex",
            r".*(BCE|CrossEntropy|NLL|[Cc]rossentropy)",
            "loss outputs (losses collection, re.match) of a cross-entropy loss",
        ),
        Param("min_passes", "int", "4", "validation passes before judging"),
        Param(
            "max_pseudo_r2",
            "float",
            "0",
            "a pass with McFadden's pseudo-R^2 at or below this is no better than the class prior",
        ),
        Param("consecutive", "int", "2", "newest passes that must all be at or below max_pseudo_r2"),
        LEARNING_Z,
        LEARNING_GROWTH,
        LEARNING_SPAN,
    )

    BOUND_PARAM = "max_pseudo_r2"
    SCORE_NAME = "the pseudo-R^2"

    def judges(self, feed: LossFeed) -> bool:
        return cross_entropy_kind(feed.loss) is not None

    def score_pass(self, feed: LossFeed, steps: list[int]) -> float | None:
        """The pooled pseudo-R^2 of one validation pass; the loss's kind (:func:`cross_entropy_kind`) says
        how to read its prediction."""
        binary, inputs = cross_entropy_kind(feed.loss)
        keras = feed.same_rank
        batches = []
        for p, t in self.pass_batches(feed, steps):
            p, t = np.asarray(p), np.asarray(t)
            if binary:
                if keras and p.shape == (*t.shape, 1):
                    t = t.reshape(p.shape)
                got = binary_cross_entropies(p, t, inputs, keras=keras)
            else:
                got = categorical_cross_entropies(p, t, inputs, feed.class_axis, keras=keras)
            if got is not None:
                batches.append(got)
        if batches:  # one width (output columns, classes) per pass: the first batch's
            batches = [b for b in batches if b[1].shape[-1] == batches[0][1].shape[-1]]
        return pooled_pseudo_r2(batches, binary)

    def check_params(self) -> None:
        super().check_params()
        self.check_learning_params()

    def still_learning(self, feed: LossFeed, passes: list[list[int]], index: int) -> bool:
        """A pass at or below the bound whose model is leaving a plateau at chance (:meth:`leaving_plateau`,
        with ``learning_z``) is not judged."""
        return self.leaving_plateau(feed, passes, index)

    def near_chance(self, feed: LossFeed, steps: list[int]) -> bool:
        """A pass scoring at least ``-max_pseudo_r2``: at the prior, not far worse than it (a model whose
        predictions are overconfident and wrong is not on a plateau at chance)."""
        score = self._score(feed, steps)
        return score is not None and score >= -self.max_pseudo_r2

    def finding(self, feed: LossFeed, scores: str, passes: int) -> str:
        """Short enough that, with the advice, nothing is cut at SageMaker's 1,024 characters."""
        span = f" in 1 or {self.learning_span} passes" if self.learning_span > 1 else ""
        growth = f"{self.fmt(self.learning_growth)}x gain{span}"
        learning = f", none learning (z >= {self.fmt(self.learning_z)}, {growth})" if self.learning_z else ""
        return (
            f"{feed.prediction} against {feed.target} ({feed.loss}): pseudo-R^2 {scores} in the newest "
            f"{self.consecutive} of {passes} passes (<= max_pseudo_r2 {self.fmt(self.max_pseudo_r2)})"
            f"{learning}: no better than the class prior"
        )

"""Whether a classifier at chance is leaving its plateau, or stuck there: shared by the rules that judge a
model that has not yet beaten chance (ClassifierNoBetterThanPrior, ValidationLossNotDecreasing).

With ``learning_z`` (off by default; 2 in the recommended set), a validation pass is a model leaving a
plateau when its predictions tell their own labels better than the labels permuted among the pass's
samples, a paired one-sided test at z >= ``learning_z`` (Ojala and Garriga 2010, "Permutation tests for
studying classifier performance", test 1, in its expectation over the permutations, each sample's baseline
the frequencies of the *other* samples' labels so that its own label cannot bias it), and that mean gain is
at least ``learning_growth`` x the previous pass's. Why: a net on a plateau at chance (a recurrent net
finding a long-range dependency) learns a little about each sample before its loss moves, and that little
grows pass over pass; shuffled labels, inputs that do not reach the model, a learning rate far off or
zeroed leave no information that grows. A model fitted to shuffled training labels can carry a small,
chance, information about the true validation labels (z 2-5 in the families benchmark): it does not double
from pass to pass.

A slow learner (``learning_span``, 1 by default: off; 3 in the recommended set): a recurrent net under a long
warmup, or stepping its optimizer once every few batches, gains information steadily but not twice over
from one pass to the next (the families benchmark's lstm: 0.012, 0.028, 0.059, 0.093, 0.102, 0.119 nats a
sample, z 1.3-6, for nine passes at chance). Such a pass, significant at ``learning_z``, is also not judged
when its gain is at least ``learning_growth`` x the gain ``learning_span`` passes before (or the first
pass's, when fewer are there) and the pass is at chance rather than below it (:meth:`near_chance`; a rule
that reads no score takes every pass as at chance). A model frozen or at a learning rate far too low gains
nothing that grows (the same gain pass after pass); one whose predictions are far worse than the prior (a
too-large initialisation, logits a learning rate blew up) and slowly less so is not a plateau at chance and
stays judged.

The test reads a cross-entropy loss's prediction and target (a
:class:`~tornasole.rules.builtin.losses.LossFeed`), as :mod:`~tornasole.rules.builtin.cross_entropies`
reads them; a loss of another kind, or a pass whose inputs were not saved, is never a plateau being left.
"""

from __future__ import annotations

import numpy as np

from tornasole.rules.builtin.cross_entropies import (
    binary_log_likelihoods,
    binary_null_entropy,
    binary_permutation_gains,
    categorical_log_probabilities,
    categorical_permutation_gains,
    cross_entropy_kind,
    permutation_z,
)
from tornasole.rules.builtin.losses import LossFeed, feed_batches
from tornasole.rules.params import Param

__all__ = ["LEARNING_GROWTH", "LEARNING_SPAN", "LEARNING_Z", "PlateauLearning"]

LEARNING_Z = Param(
    "learning_z",
    "float",
    "0",
    "a pass whose predictions tell their own labels better than the labels permuted among the pass's "
    "samples (one-sided paired z at or above this) by learning_growth x the previous pass's gain is "
    "a model leaving a plateau: not judged; 0: off",
)
LEARNING_GROWTH = Param(
    "learning_growth",
    "float",
    "2",
    "with learning_z: the factor by which the permutation gain must grow from one pass to the next",
)
LEARNING_SPAN = Param(
    "learning_span",
    "int",
    "1",
    "with learning_z: a pass at chance whose gain grew learning_growth x over this many passes (a slow "
    "learner) is not judged either; 1: pass over pass only",
)


class PlateauLearning:
    """Mixin for a :class:`BuiltinRule` with the parameters :data:`LEARNING_Z`, :data:`LEARNING_GROWTH` and
    :data:`LEARNING_SPAN`."""

    def check_learning_params(self) -> None:
        if self.learning_z < 0:
            raise self.param_error("learning_z", f"value {self.learning_z} must be >= 0 (0: off)")
        if not self.learning_growth > 0:
            raise self.param_error("learning_growth", f"value {self.learning_growth} must be > 0")
        if self.learning_span < 1:
            raise self.param_error("learning_span", f"value {self.learning_span} must be >= 1 (1: off)")

    def near_chance(self, feed: LossFeed, steps: list[int]) -> bool:
        """Whether the pass of ``steps`` scores at chance rather than below it, for the slow-learner reading
        (``learning_span``). A rule that scores passes says; here, every pass is."""
        return True

    def leaving_plateau(self, feed: LossFeed, passes: list[list[int]], index: int) -> bool:
        """With ``learning_z``: the predictions of ``feed`` in pass ``passes[index]`` (its EVAL steps) tell
        their own labels better than the labels permuted (:func:`permutation_z` at or above ``learning_z``),
        by ``learning_growth`` x the previous pass's mean gain at least, or, with ``learning_span`` above 1
        and the pass :meth:`near_chance`, x the gain ``learning_span`` passes before (the first pass's when
        fewer are there). False when the option is off, for the first pass, or when the passes compared
        cannot be read."""
        if not self.learning_z or index < 1:
            return False
        now = self._permutation(feed, passes[index])
        if now is None or now[1] < self.learning_z:
            return False
        before = self._permutation(feed, passes[index - 1])
        if before is not None and now[0] >= self.learning_growth * before[0]:
            return True
        if self.learning_span < 2 or not self.near_chance(feed, passes[index]):
            return False
        earlier = self._permutation(feed, passes[max(0, index - self.learning_span)])
        return earlier is not None and now[0] >= self.learning_growth * earlier[0]

    def _permutation(self, feed: LossFeed, steps: list[int]) -> tuple[float, float] | None:
        """:func:`permutation_z` of one pass, once per pass. Two readings of its batches: the pass's label
        totals first (what each sample's "other labels" are), then each batch's gains; no pass-sized
        array of probabilities is held (a language model's vocabulary)."""
        cache = self.__dict__.setdefault("_permutation_cache", {})
        key = (feed, steps[0], len(steps))
        if key not in cache:
            cache[key] = self._permutation_of(feed, steps)
        return cache[key]

    def _permutation_of(self, feed: LossFeed, steps: list[int]) -> tuple[float, float] | None:
        kind = cross_entropy_kind(feed.loss)
        if kind is None:
            return None
        binary, inputs = kind
        keras = feed.same_rank

        def reads():
            width = None
            for p, t in feed_batches(self, feed, steps):
                p, t = np.asarray(p), np.asarray(t)
                if binary:
                    if keras and p.shape == (*t.shape, 1):
                        t = t.reshape(p.shape)
                    read = binary_log_likelihoods(p, t, inputs, keras)
                else:
                    read = categorical_log_probabilities(p, t, inputs, feed.class_axis, keras)
                if read is None:
                    continue
                width = read[0].shape[1] if width is None else width
                if read[0].shape[1] == width:  # one width per pass, as the score reads it
                    yield read

        samples, totals = 0, None
        for read in reads():
            target = read[-1]
            if binary or target.ndim == 2:
                add = target.sum(axis=0)
            else:
                add = np.bincount(target, minlength=read[0].shape[1]).astype(np.float64)
            samples += len(target)
            totals = add if totals is None else totals + add
        if totals is None or samples < 8:
            return None
        if binary:
            columns = binary_null_entropy(totals[None, :] / samples) > 0
            gains = [binary_permutation_gains(r, totals, samples, columns) for r in reads()]
        else:
            gains = [categorical_permutation_gains(r, totals, samples) for r in reads()]
        return permutation_z(np.concatenate(gains))

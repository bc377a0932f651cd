"""The shared reading of the rules that judge a model against a null model, one whole validation pass at a
time: RegressionWorseThanMean (R^2 against the targets' mean) and ClassifierNoBetterThanPrior (McFadden's
pseudo-R^2 against the class prior).

Both read the same tensors the same way and differ only in the score of a pass: for each loss whose name
``loss_regex`` matches, its prediction and target (:func:`~tornasole.rules.builtin.losses.loss_feeds`),
both saved at the evaluated step; points are validation passes (EVAL steps grouped by
:func:`trial_phases`, each cut to the shortest pass's length and the newest judged once, whole:
:func:`whole_passes`); a pass's score pools all its saved batches and is computed once (a saved step never
changes). A rule fires at an EVAL step once there are ``min_passes`` passes when each of the newest
``consecutive`` passes scores at or below its bound.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator
from typing import Any, ClassVar

from tornasole.modes import EVAL
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.losses import LossFeed, feed_batches, loss_feeds
from tornasole.rules.builtin.overfit import trial_phases, whole_passes

__all__ = ["PassScoreRule"]


class PassScoreRule(BuiltinRule):
    """Base of a rule whose parameters ``loss_regex``, ``min_passes``, ``consecutive`` and ``BOUND_PARAM``
    (a score at or below it is no better than the null model) say which losses it judges and when.

    A subclass gives the score of one pass (:meth:`score_pass`), the finding's message (:meth:`finding`)
    and, when it judges only some of the losses ``loss_regex`` matches, :meth:`judges`.
    """

    #: The parameter holding the bound; a score is at most 1, so the bound must be below it.
    BOUND_PARAM: ClassVar[str] = ""
    #: The score as the parameter error names it ("R^2", "the pseudo-R^2").
    SCORE_NAME: ClassVar[str] = ""
    #: The losses and what they were fed (PyTorch's ``<Loss>_input_0/1``, Keras's ``predictions``,
    #: ``labels`` and ``batch_loss/<Kind>``): every input these rules read.
    COLLECTIONS = (
        ("losses", {"save_interval": "500"}),
        (
            "loss_inputs",
            {
                "include_regex": "[Ll]oss_input_[01]$|^(predictions|labels)$|^batch_loss/",
                "save_interval": "500",
            },
        ),
    )

    def check_params(self) -> None:
        self.require_at_least(1, "min_passes", "consecutive")
        if self.consecutive > self.min_passes:
            raise self.param_error(
                "consecutive", f"value {self.consecutive} must be <= min_passes ({self.min_passes})"
            )
        bound = getattr(self, self.BOUND_PARAM)
        if not bound < 1:
            raise self.param_error(
                self.BOUND_PARAM, f"value {bound} must be < 1 ({self.SCORE_NAME} is at most 1)"
            )

    def history_steps(self) -> int | None:
        return None  # every validation pass since the start

    def judges(self, feed: LossFeed) -> bool:
        """Whether the rule scores ``feed`` at all (every loss ``loss_regex`` matches, unless overridden)."""
        return True

    @abstractmethod
    def score_pass(self, feed: LossFeed, steps: list[int]) -> float | None:
        """The pooled score of the validation pass of ``steps`` (None: not judged)."""

    def still_learning(self, feed: LossFeed, passes: list[list[int]], index: int) -> bool:
        """Whether ``passes[index]``, scored at or below the bound, is nonetheless a model on its way out of
        a plateau and so not judged (none is, unless a subclass says so)."""
        return False

    @abstractmethod
    def finding(self, feed: LossFeed, scores: str, passes: int) -> str:
        """The finding's message: ``scores`` the newest passes' scores, shown; ``passes`` how many passes
        there are."""

    def pass_batches(self, feed: LossFeed, steps: list[int]) -> Iterator[tuple[Any, Any]]:
        """``(prediction, target)`` of each of ``steps`` at which both were saved, as read."""
        return feed_batches(self, feed, steps)

    def _saved_feeds(self, step: int) -> list[LossFeed]:
        """Each loss saved at ``step`` that ``loss_regex`` matches and the rule :meth:`judges`, its prediction
        and target both saved at ``step``; one per (prediction, target)."""
        saved = set(self.base_trial.tensor_names(step=step))
        out: list[LossFeed] = []
        seen: set[tuple[str, str]] = set()
        for feed in loss_feeds(self, step, self.loss_regex):
            pair = (feed.prediction, feed.target)
            if pair[0] not in saved or pair[1] not in saved or pair in seen or not self.judges(feed):
                continue
            seen.add(pair)
            out.append(feed)
        return out

    def _score(self, feed: LossFeed, steps: list[int]) -> float | None:
        """:meth:`score_pass`, once per pass."""
        cache = self.__dict__.setdefault("_pass_score_cache", {})
        key = (feed, steps[0], len(steps))
        if key not in cache:
            cache[key] = self.score_pass(feed, steps)
        return cache[key]

    def invoke_at_step(self, step: int) -> bool:
        if self.base_trial.mode(step) != EVAL:
            return False
        bound = getattr(self, self.BOUND_PARAM)
        for feed in self._saved_feeds(step):
            gsteps = [s for s in self.base_trial.tensor(feed.prediction).steps() if s <= step]
            if not gsteps or gsteps[-1] != step:
                continue
            evals = [st for mode, st in trial_phases(self.base_trial, gsteps) if mode == EVAL]
            if len(evals) < self.min_passes:
                continue
            passes = whole_passes(evals)
            if passes is None:
                continue  # the newest pass is judged once, whole
            newest = [self._score(feed, p) for p in passes[-self.consecutive :]]
            if any(r is None or r > bound for r in newest):
                continue
            first = len(passes) - self.consecutive
            if any(self.still_learning(feed, passes, i) for i in range(first, len(passes))):
                continue
            self.report_issue(
                self.finding(feed, ", ".join(self.fmt(r) for r in newest), len(passes)),
                tensor=feed.prediction,
                steps=[s for p in passes[-self.consecutive :] for s in p],
            )
            return True
        return False

"""PassScoreRule, the reading RegressionWorseThanMean and ClassifierNoBetterThanPrior share: which loss feeds
are judged, when (whole passes, after ``min_passes``, ``consecutive`` at or below the bound), and that a
pass is scored once. A toy score (a pass's mean prediction) makes each pass's score exact."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tornasole.exceptions import RuleParameterError
from tornasole.modes import EVAL, TRAIN
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.losses import LossFeed
from tornasole.rules.builtin.pass_scores import PassScoreRule
from tornasole.rules.params import Param

COLLS = {"losses": ["[Ll]oss_(?!input).*output"], "loss_inputs": ["[Ll]oss_input_[01]$"]}
KERAS_COLLS = {"losses": ["(^|_)loss$"], "loss_inputs": ["^(predictions|labels)$|^batch_loss/"]}


class MeanPrediction(PassScoreRule):
    """Scores a pass by its mean prediction; judges every loss but ``skip_loss``."""

    LIKELY_CAUSE, SUGGESTED_FIX = "{tensor}: low", "raise it"
    BOUND_PARAM, SCORE_NAME = "max_mean", "the mean"
    #: (name, kind, default): the parameters PassScoreRule reads, and the loss this toy does not judge
    PARAMETERS = tuple(
        Param(name, kind, default, name)
        for name, kind, default in [
            ("loss_regex", "regex", ".*"),
            ("min_passes", "int", "3"),
            ("max_mean", "float", "0"),
            ("consecutive", "int", "2"),
            ("skip_loss", "str", ""),
        ]
    )

    def judges(self, feed: LossFeed) -> bool:
        return feed.loss != self.skip_loss

    def score_pass(self, feed: LossFeed, steps: list[int]) -> float | None:
        self.__dict__.setdefault("scored", []).append((feed.loss, tuple(steps)))
        return float(np.mean([np.mean(p) for p, _ in self.pass_batches(feed, steps)]))

    def finding(self, feed: LossFeed, scores: str, passes: int) -> str:
        return f"{feed.loss}: {scores} of {passes}"


def _trace(trial_factory, means: list[float], batches: int = 2):
    """Epochs of 2 TRAIN steps then a validation pass of ``batches`` EVAL steps predicting ``mean``."""
    steps: dict[int, Any] = {}
    g = tr = ev = 0
    for mean in means:
        for _ in range(2):
            steps[g] = (TRAIN, tr, {"MSELoss_output_0": np.float32(1.0)})
            g, tr = g + 1, tr + 1
        for _ in range(batches):
            tensors = {
                "MSELoss_output_0": np.float32(1.0),
                "MSELoss_input_0": np.full((4, 1), mean, np.float32),
                "MSELoss_input_1": np.zeros((4, 1), np.float32),
            }
            steps[g] = (EVAL, ev, tensors)
            g, ev = g + 1, ev + 1
    return trial_factory(steps, COLLS)


def _fired_passes(trial, batches: int = 2, **params: str) -> list[int]:
    eval_steps = [s for s in trial.tensor("MSELoss_input_0").steps() if trial.mode(s) == EVAL]
    return [
        eval_steps.index(f.step) // batches + 1 for f in invoke_rule(MeanPrediction(trial, **params)).fired
    ]


def test_fires_after_min_passes_when_the_newest_consecutive_passes_are_at_or_below_the_bound(trial_factory):
    assert _fired_passes(_trace(trial_factory, [0.0, 0.0, 0.0, 1.0, 0.0, 0.0])) == [3, 6]
    assert _fired_passes(_trace(trial_factory, [0.0, 1.0, 0.0, 1.0, 0.0])) == []  # never two in a row
    assert _fired_passes(_trace(trial_factory, [1.0, 1.0, 0.0, 1.0]), consecutive="1") == [3]


def test_the_finding_names_the_prediction_and_the_newest_passes_steps(trial_factory):
    trial = _trace(trial_factory, [0.5, -1.0, -2.0])
    finding = invoke_rule(MeanPrediction(trial)).fired[0]
    assert finding.values["tensor"] == "MSELoss_input_0"
    assert "MSELoss_output_0: -1, -2 of 3" in finding.details
    assert finding.step == 11
    assert finding.values["steps"] == [6, 7, 10, 11]  # the two newest passes' EVAL steps


def test_each_pass_is_scored_once(trial_factory):
    rule = MeanPrediction(_trace(trial_factory, [0.0] * 5))
    invoke_rule(rule)
    # passes 2-5: the first is never among the newest two at a judged step (pass 3 onwards)
    assert sorted(rule.scored) == [("MSELoss_output_0", (s, s + 1)) for s in (6, 10, 14, 18)]


def test_a_feed_the_rule_does_not_judge_leaves_the_pair_to_the_next_loss_fed_it(trial_factory):
    """Keras's batch losses all name ``predictions`` and ``labels``: the first is not judged, so the second,
    fed the same pair, is."""
    steps: dict[int, Any] = {}
    counts = {TRAIN: 0, EVAL: 0}
    for s in range(4 * 3):
        mode = TRAIN if s % 4 < 2 else EVAL
        losses = {"batch_loss/A": np.float32(1.0), "batch_loss/B": np.float32(1.0)}
        tensors = {"predictions": np.zeros((4, 1), np.float32), "labels": np.ones((4, 1), np.float32)}
        steps[s] = (mode, counts[mode], {"loss": np.float32(1.0), **losses, **tensors})
        counts[mode] += 1
    trial = trial_factory(steps, KERAS_COLLS)
    fired = invoke_rule(MeanPrediction(trial, skip_loss="batch_loss/A")).fired
    assert len(fired) == 1
    assert "batch_loss/B: 0, 0 of 3" in fired[0].details
    (other,) = invoke_rule(MeanPrediction(trial, skip_loss="batch_loss/B")).fired
    assert "batch_loss/A: 0, 0 of 3" in other.details  # the first loss fed the pair, when it is judged


@pytest.mark.parametrize(
    ("params", "parameter", "message"),
    [
        ({"min_passes": "0"}, "min_passes", "must be >= 1"),
        ({"consecutive": "4"}, "consecutive", "must be <= min_passes (3)"),
        ({"max_mean": "1"}, "max_mean", "must be < 1 (the mean is at most 1)"),
    ],
)
def test_bad_parameters_name_the_parameter(trial_factory, params, parameter, message):
    with pytest.raises(RuleParameterError) as err:
        MeanPrediction(_trace(trial_factory, [0.0]), **params)
    assert err.value.parameter == parameter
    assert message in str(err.value)

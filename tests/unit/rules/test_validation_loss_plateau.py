"""Issue #29: ValidationLossNotDecreasing's ``learning_z``/``learning_growth``, a classifier leaving a plateau
at chance (rules/builtin/plateau_learning.py, the test ClassifierNoBetterThanPrior already applies).

On the families benchmark the rule alone alarmed on two healthy sequence runs at their fourth validation
pass (lstm ``heavy_dropout`` s1: mean validation losses 1.382, 1.394, 1.398, 1.379, then 0.945): the mean
loss had not moved, while the predictions already told their own labels better than the labels permuted,
twice as well as a pass before. The traces here are that shape, written with the format writer: the
validation logits grow toward the labels while growing more confident overall, so the pooled cross-entropy
stays where it started; the test computes every pass's loss and permutation statistic first, so the
premise is asserted, not assumed. The shuffled twin (the same logits toward labels independent of the true
ones) still fires at the fourth pass; so does a loss that is not a cross-entropy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tornasole.exceptions import RuleParameterError
from tornasole.modes import EVAL, TRAIN
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.cross_entropies import (
    categorical_cross_entropies,
    categorical_permutation_gains,
    permutation_z,
)
from tornasole.rules.builtin.recommended import RECOMMENDED
from tornasole.rules.generic import ValidationLossNotDecreasing

COLLS = {"losses": ["[Ll]oss_(?!input).*output"], "loss_inputs": ["[Ll]oss_input_[01]$"]}
KERAS_COLLS = {"losses": ["(^|_)loss$"], "loss_inputs": ["^(predictions|labels)$|^batch_loss/"]}
SAMPLES, BATCHES, CLASSES = 256, 4, 4
LABELS = np.arange(SAMPLES) % CLASSES
#: Labels independent of :data:`LABELS`: what a model fitted to shuffled training labels learns about.
OTHER = np.random.default_rng(1).permutation(LABELS)
NOISE = np.random.default_rng(0).normal(0.0, 0.5, (SAMPLES, CLASSES))
(PARAMS,) = [dict(p) for name, _, p in RECOMMENDED if name == "ValidationLossNotDecreasing"]
WITHOUT = {k: v for k, v in PARAMS.items() if k != "learning_z"}

#: ``(confidence, strength)`` per validation pass: logits ``confidence x noise + strength x one-hot(label)``.
#: Two passes at chance, then a signal about the labels that more than doubles while the confidence grows
#: with it, so that the mean loss stays at the first pass's (chosen by solving for the confidence); then
#: the plateau is left.
PASSES = [(1.0, 0.0), (1.0, 0.0), (1.451, 0.1), (1.941, 0.25), (1.0, 0.9), (1.0, 1.5)]


def _logits(confidence: float, strength: float, labels: np.ndarray) -> np.ndarray:
    return (confidence * NOISE + strength * np.eye(CLASSES)[labels]).astype(np.float32)


#: A slow learner, the same way: the signal grows 1.3x a pass for four passes (the lstm family's runs under
#: a long warmup or gradient accumulation, RESULTS.md), the loss kept at the first pass's.
SLOW = [(1.0, 0.0), (1.155, 0.03), (1.247, 0.05), (1.373, 0.08), (1.525, 0.12), (1.696, 0.17)]


def _statistics(
    labels: np.ndarray, passes: list[tuple[float, float]] = PASSES
) -> list[tuple[float, float, float]]:
    """(mean cross-entropy, mean permutation gain, z) of each pass against the true :data:`LABELS`."""
    out = []
    for confidence, strength in passes:
        logits = _logits(confidence, strength, labels).astype(np.float64)
        ce, _ = categorical_cross_entropies(logits, LABELS, "logits", 1)
        log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        gains = categorical_permutation_gains((log_p, LABELS), np.bincount(LABELS).astype(float), SAMPLES)
        out.append((float(ce.mean()), *permutation_z(gains)))
    return out


def _trace(
    trial_factory,
    labels: np.ndarray,
    keras: bool = False,
    loss: str = "CrossEntropyLoss",
    passes: list[tuple[float, float]] = PASSES,
):
    """Epochs of 2 TRAIN steps whose loss falls 2 % an epoch (the model memorises), then a validation pass
    of :data:`BATCHES` EVAL steps, each saving its batch's real mean cross-entropy. ``keras``: the Keras
    hook's names (a running ``loss`` in both modes, ``batch_loss/<Kind>``, ``predictions``, ``labels``)."""
    steps: dict[int, Any] = {}
    g = tr = ev = 0
    per = SAMPLES // BATCHES
    for epoch, (confidence, strength) in enumerate(passes):
        logits = _logits(confidence, strength, labels)
        for _ in range(2):
            value = np.float32(1.4 * 0.98**epoch)
            saved = {"loss": value} if keras else {f"{loss}_output_0": value}
            steps[g] = (TRAIN, tr, saved)
            g, tr = g + 1, tr + 1
        for b in range(BATCHES):
            rows = slice(b * per, (b + 1) * per)
            ce, _ = categorical_cross_entropies(logits[rows], LABELS[rows], "logits", 1)
            value = np.float32(ce.mean())
            if keras:
                saved = {
                    "loss": value,
                    "batch_loss/SparseCategoricalCrossentropy_from_logits": value,
                    "predictions": logits[rows],
                    "labels": LABELS[rows],
                }
            else:
                saved = {
                    f"{loss}_output_0": value,
                    f"{loss}_input_0": logits[rows],
                    f"{loss}_input_1": LABELS[rows],
                }
            steps[g] = (EVAL, ev, saved)
            g, ev = g + 1, ev + 1
    return trial_factory(steps, KERAS_COLLS if keras else COLLS)


def _fired_passes(trial, params: dict[str, str]) -> list[int]:
    eval_steps = [s for s in trial.steps() if trial.mode(s) == EVAL]
    fired = invoke_rule(ValidationLossNotDecreasing(trial, **params)).fired
    return [eval_steps.index(f.step) // BATCHES + 1 for f in fired]


def test_the_recommended_set_turns_the_test_on():
    assert PARAMS["learning_z"] == "2"
    assert PARAMS["learning_growth"] == "2"
    assert PARAMS["learning_span"] == "3"
    assert PARAMS["min_passes"] == "4"


def test_a_plateau_being_left_is_quiet_and_fires_without_the_option(trial_factory):
    stats = _statistics(LABELS)
    first = stats[0][0]
    # the premise: four passes within 2 % of the first pass's loss; the fourth learning (z >= 2, gain
    # more than doubled); then the loss falls
    assert all(abs(ce - first) / first < 0.02 for ce, _, _ in stats[:4]), stats
    assert stats[3][2] >= 2, stats
    assert stats[3][1] >= 2 * stats[2][1], stats
    assert stats[4][0] < 0.9 * first, stats
    trial = _trace(trial_factory, LABELS)
    assert _fired_passes(trial, WITHOUT) == [4]
    summary = invoke_rule(ValidationLossNotDecreasing(trial, **PARAMS))
    assert summary.status == "NoIssuesFound"
    assert not summary.fired


def test_a_slow_learner_is_quiet_its_gain_doubles_within_three_passes(trial_factory):
    stats = _statistics(LABELS, SLOW)
    first = stats[0][0]
    # the premise: every pass within 2 % of the first pass's loss; from the third on, significant, never
    # twice the pass before, at least twice the gain three passes before (the first pass's for the third)
    assert all(abs(ce - first) / first < 0.02 for ce, _, _ in stats), stats
    for i in range(2, len(SLOW)):
        assert stats[i][2] >= 2, stats
        assert stats[i][1] < 2 * stats[i - 1][1] <= 2 * stats[i][1], stats
        assert stats[i][1] >= 2 * stats[max(0, i - 3)][1], stats
    trial = _trace(trial_factory, LABELS, passes=SLOW)
    assert _fired_passes(trial, {**PARAMS, "learning_span": "1"}) == [4, 5, 6]
    assert _fired_passes(trial, PARAMS) == []


def test_the_shuffled_twin_fires_at_the_fourth_pass(trial_factory):
    stats = _statistics(OTHER)
    assert all(z < 2 for _, _, z in stats), stats  # the premise: nothing about the true labels
    trial = _trace(trial_factory, OTHER)
    assert _fired_passes(trial, PARAMS)[0] == 4
    assert _fired_passes(trial, PARAMS) == _fired_passes(trial, WITHOUT)


def test_keras_names_are_read_through_the_one_cross_entropy_saved(trial_factory):
    """Keras's running ``loss`` names no kind: its prediction and target come from the one
    ``batch_loss/<Kind>`` saved with ``predictions`` and ``labels``."""
    trial = _trace(trial_factory, LABELS, keras=True)
    assert _fired_passes(trial, WITHOUT)[0] == 4
    assert not invoke_rule(ValidationLossNotDecreasing(trial, **PARAMS)).fired
    twin = _trace(trial_factory, OTHER, keras=True)
    assert _fired_passes(twin, PARAMS)[0] == 4


def test_a_loss_that_is_not_a_cross_entropy_is_judged_as_without_the_option(trial_factory):
    """The same values saved as an MSELoss's: no classifier to test, so the fourth pass fires."""
    trial = _trace(trial_factory, LABELS, loss="MSELoss")
    assert _fired_passes(trial, PARAMS)[0] == 4
    assert _fired_passes(trial, PARAMS) == _fired_passes(trial, WITHOUT)


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"learning_z": "-1"}, "learning_z"),
        ({"learning_growth": "0"}, "learning_growth"),
        ({"learning_span": "0"}, "learning_span"),
    ],
)
def test_bad_learning_parameters_name_the_parameter(trial_factory, params, parameter):
    with pytest.raises(RuleParameterError, match=parameter):
        ValidationLossNotDecreasing(_trace(trial_factory, LABELS), **params)

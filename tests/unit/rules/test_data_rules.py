"""Data and classification rules: ClassImbalance, Confusion, CheckInputImages, NLPSequenceRatio."""

from __future__ import annotations

import numpy as np
import pytest

from tornasole.exceptions import RuleParameterError
from tornasole.rules import invoke_rule
from tornasole.rules.generic import CheckInputImages, ClassImbalance, Confusion, NLPSequenceRatio
from tornasole.rules.outcome import split_advice


def test_class_imbalance_fires_once_enough_samples_show_imbalance(trial_factory):
    labels = np.array([0] * 95 + [1] * 5)  # 19:1
    trial = trial_factory({s: {"labels": labels, "predictions": labels} for s in range(4)})
    summary = invoke_rule(ClassImbalance(trial, samples="250"))
    assert summary.first_step == 2  # 300 labels seen at step 2
    assert summary.fired[0].values["counts"] == {"0": 285, "1": 15}


def test_class_imbalance_fires_on_mispredicted_class(trial_factory):
    labels = np.array([0, 1] * 50)
    preds = np.zeros(100, dtype=np.int64)  # class 1 always wrong
    trial = trial_factory({s: {"labels": labels, "predictions": preds} for s in range(2)})
    summary = invoke_rule(ClassImbalance(trial, samples="100"))
    assert summary.first_step == 0
    assert "class 1 mispredicted in 1 of 50 samples" in summary.fired[0].details


def test_class_imbalance_quiet_on_balanced_correct_data(trial_factory):
    labels = np.array([0, 1, 2] * 40)
    trial = trial_factory({s: {"labels": labels, "predictions": labels} for s in range(3)})
    assert invoke_rule(ClassImbalance(trial, samples="100")).fired == []


def test_class_imbalance_argmax_on_probabilities(trial_factory):
    labels = np.array([0, 1] * 10)
    probs = np.eye(2)[1 - labels]  # always the other class
    trial = trial_factory({0: {"labels": labels, "predictions": probs}})
    assert invoke_rule(ClassImbalance(trial, samples="10", argmax="true")).first_step == 0
    assert invoke_rule(ClassImbalance(trial, samples="10")).fired == []  # shapes differ: not judged


def test_confusion_fires_on_a_confused_batch(trial_factory):
    labels = np.array([0, 1, 2] * 10)
    good = labels.copy()
    bad = labels.copy()
    bad[labels == 2] = 1
    trial = trial_factory(
        {0: {"labels": labels, "predictions": good}, 1: {"labels": labels, "predictions": bad}}
    )
    summary = invoke_rule(Confusion(trial))
    assert summary.first_step == 1
    assert "class 2" in summary.fired[0].details


def test_confusion_quiet_when_mostly_right_and_thresholds_apply(trial_factory):
    labels = np.arange(20) % 2
    preds = labels.copy()
    preds[0] = 1  # 1 of 10 class-0 samples wrong: diag 0.9, off 0.1
    trial = trial_factory({0: {"labels": labels, "predictions": preds}})
    assert invoke_rule(Confusion(trial)).fired == []
    assert invoke_rule(Confusion(trial, min_diag="0.95")).first_step == 0


def test_check_input_images_fires_after_enough_unnormalised_images(trial_factory):
    imgs = np.full((4, 3, 2, 2), 0.5, np.float32)  # NCHW, mean 0.5
    trial = trial_factory({s: {"model_input_0": imgs} for s in range(3)})
    summary = invoke_rule(CheckInputImages(trial, regex=".*input_0", threshold_samples="8"))
    assert summary.first_step == 1
    assert summary.fired[0].values["images"] == 8


def test_check_input_images_quiet_on_normalised_images(trial_factory):
    rng = np.random.default_rng(0)
    trial = trial_factory({s: {"model_input_0": rng.normal(0, 1, (50, 3, 4, 4))} for s in range(2)})
    assert invoke_rule(CheckInputImages(trial, regex=".*input_0", threshold_samples="10")).fired == []


def test_nlp_sequence_ratio_fires_on_too_much_padding(trial_factory):
    ok = np.array([[5, 6, 7, 0], [3, 4, 0, 0]])
    padded = np.array([[5, 0, 0, 0], [3, 0, 0, 0]])
    trial = trial_factory({0: {"embedding0_input_0": ok}, 1: {"embedding0_input_0": padded}})
    summary = invoke_rule(NLPSequenceRatio(trial))
    assert summary.first_step == 1
    assert split_advice(summary.fired[0].details)[0].endswith("token 0 is 75% of embedding0_input_0 (> 50%)")


def test_nlp_sequence_ratio_lists_must_match(trial_factory):
    trial = trial_factory({0: {"embedding0_input_0": np.ones(3)}})
    # one threshold applies to every token: token 1 is 100% of the sequence
    rule = NLPSequenceRatio(trial, token_values="0,1", token_thresholds_percent="90")
    assert invoke_rule(rule).first_step == 0
    with pytest.raises(RuleParameterError, match="token_thresholds_percent"):
        NLPSequenceRatio(trial, token_values="0,1,2", token_thresholds_percent="1,2")


def test_nlp_sequence_ratio_quiet_on_short_padding(trial_factory):
    seqs = np.array([[5, 6, 7, 0], [3, 4, 8, 9]])  # 12.5% padding
    trial = trial_factory({s: {"embedding0_input_0": seqs} for s in range(2)})
    assert invoke_rule(NLPSequenceRatio(trial)).fired == []

"""The loss-input rules on a Keras trial's names (``batch_loss/<Kind>``, ``predictions``, ``labels``: what
the Keras hook saves for them) in the serverless evaluator on moto: each fires as the steps arrive one
notification at a time, at the step ``invoke_rule`` names over the whole trial, and stays quiet on its
healthy twin; SoftmaxBeforeCrossEntropy stays quiet on Keras's softmax + ``from_logits=False`` idiom."""

from __future__ import annotations

import numpy as np
from evaluator_stack import TRIAL, Stack
from rule_runs import run_in_evaluator

from tornasole.modes import ModeKeys
from tornasole.rules import create_rule, invoke_rule
from tornasole.trials import create_trial

COLLECTIONS = {
    "losses": {"name": "losses", "include_regex": ["(^|_)loss$"]},
    "loss_inputs": {"name": "loss_inputs", "include_regex": ["^(predictions|labels)$|^batch_loss/"]},
}


def _softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def _classifier_run(stack: Stack, rule: dict, loss_name: str, softmax: bool, first_loss: float) -> tuple:
    rng = np.random.default_rng(3)

    def tensors(step: int) -> dict[str, np.ndarray]:
        logits = rng.normal(size=(16, 5)).astype(np.float32)
        value = np.float32(first_loss if step == 0 else 1.0)
        return {
            "loss": np.array([value], np.float32),
            loss_name: np.array([value], np.float32),
            "predictions": _softmax(logits) if softmax else logits,
            "labels": rng.integers(0, 5, size=16),
        }

    got = run_in_evaluator(stack, [rule], 6, tensors, collections=COLLECTIONS)
    return got[rule["RuleConfigurationName"]]


SOFTMAX = {"RuleConfigurationName": "SoftmaxBeforeCrossEntropy", "RuleParameters": {}}
INITIAL = {"RuleConfigurationName": "InitialLossTooHigh", "RuleParameters": {"factor": "1.4"}}


def test_softmax_into_a_from_logits_loss_fires_in_the_evaluator_as_offline(stack: Stack) -> None:
    status, details = _classifier_run(
        stack, SOFTMAX, "batch_loss/SparseCategoricalCrossentropy_from_logits", True, 1.6
    )
    assert status == "IssuesFound", details
    offline = invoke_rule(create_rule("SoftmaxBeforeCrossEntropy", create_trial(TRIAL)))
    assert offline.first_step == 2
    assert "predictions (TRAIN): every row over 5 classes" in details


def test_the_keras_idiom_softmax_with_from_logits_false_is_quiet_in_the_evaluator(stack: Stack) -> None:
    status, details = _classifier_run(stack, SOFTMAX, "batch_loss/SparseCategoricalCrossentropy", True, 1.6)
    assert status == "NoIssuesFound", details


def test_initial_loss_too_high_reads_the_keras_kind_and_class_count_in_the_evaluator(stack: Stack) -> None:
    # 14 = 8.7 x ln 5: above any_init_factor (8), judged with no weights saved
    status, details = _classifier_run(stack, INITIAL, "batch_loss/SparseCategoricalCrossentropy", False, 14.0)
    assert status == "IssuesFound", details
    offline = invoke_rule(create_rule("InitialLossTooHigh", create_trial(TRIAL), factor="1.4"))
    assert offline.first_step == 0
    assert "ln 5: 5 classes" in details


def test_a_first_loss_near_chance_is_quiet_in_the_evaluator(stack: Stack) -> None:
    status, details = _classifier_run(stack, INITIAL, "batch_loss/SparseCategoricalCrossentropy", False, 1.7)
    assert status == "NoIssuesFound", details
    assert not details.startswith("NothingEvaluated"), details  # it found the kind and judged the loss


def _regression_run(stack: Stack, r2: float) -> tuple:
    """Epochs of 2 TRAIN steps, each followed by a validation pass of 2 steps with R^2 ``r2``."""
    target = np.random.default_rng(3).normal(size=(16, 1)).astype(np.float32)
    pred = (target + np.sqrt(1.0 - r2) * (target - target.mean(axis=0))).astype(np.float32)

    def mode_of(step: int) -> ModeKeys:
        return ModeKeys.TRAIN if step % 4 < 2 else ModeKeys.EVAL

    def tensors(_step: int) -> dict[str, np.ndarray]:
        one = np.array([1.0], np.float32)
        return {"loss": one, "batch_loss/MeanSquaredError": one, "predictions": pred, "labels": target}

    rule = {"RuleConfigurationName": "RegressionWorseThanMean", "RuleParameters": {"max_r2": "-0.25"}}
    got = run_in_evaluator(stack, [rule], 20, tensors, collections=COLLECTIONS, mode_of=mode_of)
    return got["RegressionWorseThanMean"]


def test_a_keras_regression_worse_than_the_mean_fires_in_the_evaluator_as_offline(stack: Stack) -> None:
    status, details = _regression_run(stack, r2=-1.0)
    assert status == "IssuesFound", details
    offline = invoke_rule(create_rule("RegressionWorseThanMean", create_trial(TRIAL), max_r2="-0.25"))
    assert offline.first_step == 15  # the 4th validation pass's end
    assert f"step {offline.first_step} " in details
    assert "predictions against labels" in details


def test_a_keras_regression_that_beats_the_mean_is_quiet_in_the_evaluator(stack: Stack) -> None:
    status, details = _regression_run(stack, r2=0.5)
    assert status == "NoIssuesFound", details
    assert not details.startswith("NothingEvaluated"), details

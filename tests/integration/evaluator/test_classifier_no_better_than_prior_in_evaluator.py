"""ClassifierNoBetterThanPrior in the serverless evaluator on moto, with the recommended set's parameters:
it fires as the steps arrive one notification at a time (every validation pass since the start is history
it reads), at the step ``invoke_rule`` names over the whole trial, and stays quiet on the twin whose
predictions beat the class prior."""

from __future__ import annotations

import numpy as np
import pytest
from evaluator_stack import TRIAL, Stack
from rule_runs import run_in_evaluator

from tornasole.modes import ModeKeys
from tornasole.rules import create_rule, invoke_rule, recommended_rules
from tornasole.trials import create_trial

# moto as the local mode runs it: the rule runs are long, and their claim is the verdicts (conftest)
pytestmark = pytest.mark.usefixtures("moto_as_local_mode")

EPOCHS, TRAIN_STEPS, EVAL_STEPS = 5, 2, 2
(RULE,) = [r for r in recommended_rules() if r["RuleConfigurationName"] == "ClassifierNoBetterThanPrior"]
PARAMS = {k: v for k, v in RULE["RuleParameters"].items() if k != "rule_to_invoke"}
COLLECTIONS = {
    "losses": {"name": "losses", "include_regex": ["[Ll]oss_(?!input).*output"]},
    "loss_inputs": {"name": "loss_inputs", "include_regex": ["[Ll]oss_input_[01]$"]},
}


def _run(stack: Stack, skill: float) -> dict[str, tuple[str, str]]:
    """Epochs of TRAIN steps, each followed by a validation pass of a sigmoid classifier (BCELoss) whose
    probabilities move ``skill`` of the way from the class prior (0.75) to the targets."""
    target = np.array([1.0] * 12 + [0.0] * 4, dtype=np.float32).reshape(16, 1)
    pred = (0.75 + skill * (np.clip(target, 0.05, 0.95) - 0.75)).astype(np.float32)

    def mode_of(step: int) -> ModeKeys:
        return ModeKeys.TRAIN if step % (TRAIN_STEPS + EVAL_STEPS) < TRAIN_STEPS else ModeKeys.EVAL

    def tensors(step: int) -> dict[str, np.ndarray]:
        saved = {"BCELoss_output_0": np.float32(0.5)}
        if mode_of(step) == ModeKeys.EVAL:
            saved.update({"BCELoss_input_0": pred, "BCELoss_input_1": target})
        return saved

    steps = EPOCHS * (TRAIN_STEPS + EVAL_STEPS)
    return run_in_evaluator(stack, [RULE], steps, tensors, collections=COLLECTIONS, mode_of=mode_of)


def test_a_classifier_at_the_class_prior_fires_in_the_evaluator_as_offline(stack: Stack) -> None:
    status, details = _run(stack, skill=0.0)["ClassifierNoBetterThanPrior"]
    assert status == "IssuesFound", details
    offline = invoke_rule(create_rule("ClassifierNoBetterThanPrior", create_trial(TRIAL), **PARAMS))
    assert offline.first_step == 4 * (TRAIN_STEPS + EVAL_STEPS) - 1  # the 4th pass's end
    assert f"step {offline.first_step} " in details
    assert "BCELoss_input_0 against BCELoss_input_1" in details


def test_a_classifier_that_beats_the_prior_is_quiet_in_the_evaluator(stack: Stack) -> None:
    status, details = _run(stack, skill=0.6)["ClassifierNoBetterThanPrior"]
    assert status == "NoIssuesFound", details
    assert not details.startswith("NothingEvaluated"), details  # it read the prediction and target, judged


def _plateau_run(stack: Stack, labels_seen: str) -> dict[str, tuple[str, str]]:
    """Six epochs of a 4-class classifier (CrossEntropyLoss) at the prior for two passes, then logits
    growing 3x a pass toward ``labels_seen``: the validation labels themselves (a plateau being left, the
    lstm family's healthy runs) or labels independent of them (a model fitted to shuffled labels)."""
    labels = np.arange(256) % 4
    seen = labels if labels_seen == "own" else np.random.default_rng(1).permutation(labels)
    noise = np.random.default_rng(0).normal(0.0, 0.5, (256, 4))
    strengths = [0.0, 0.0, 0.05, 0.15, 0.45, 0.9]
    per_epoch = TRAIN_STEPS + EVAL_STEPS

    def mode_of(step: int) -> ModeKeys:
        return ModeKeys.TRAIN if step % per_epoch < TRAIN_STEPS else ModeKeys.EVAL

    def tensors(step: int) -> dict[str, np.ndarray]:
        saved = {"CrossEntropyLoss_output_0": np.float32(1.4)}
        if mode_of(step) == ModeKeys.EVAL:
            rows = slice((step % per_epoch - TRAIN_STEPS) * 128, (step % per_epoch - TRAIN_STEPS + 1) * 128)
            logits = noise + strengths[step // per_epoch] * np.eye(4)[seen]
            saved.update(
                {
                    "CrossEntropyLoss_input_0": logits[rows].astype(np.float32),
                    "CrossEntropyLoss_input_1": labels[rows],
                }
            )
        return saved

    return run_in_evaluator(stack, [RULE], 6 * per_epoch, tensors, collections=COLLECTIONS, mode_of=mode_of)


def test_a_plateau_being_left_is_quiet_in_the_evaluator_and_its_shuffled_twin_fires(stack: Stack) -> None:
    """The recommended learning_z/learning_growth, one notification at a time: each pass's permutation
    statistic needs the pass before it, which the evaluator reads as history."""
    status, details = _plateau_run(stack, "own")["ClassifierNoBetterThanPrior"]
    assert status == "NoIssuesFound", details
    assert not details.startswith("NothingEvaluated"), details
    offline = invoke_rule(create_rule("ClassifierNoBetterThanPrior", create_trial(TRIAL), **PARAMS))
    assert not offline.fired
    without = {k: v for k, v in PARAMS.items() if k != "learning_z"}
    assert invoke_rule(create_rule("ClassifierNoBetterThanPrior", create_trial(TRIAL), **without)).fired


def test_shuffled_labels_fire_in_the_evaluator_as_offline(stack: Stack) -> None:
    status, details = _plateau_run(stack, "other")["ClassifierNoBetterThanPrior"]
    assert status == "IssuesFound", details
    offline = invoke_rule(create_rule("ClassifierNoBetterThanPrior", create_trial(TRIAL), **PARAMS))
    assert offline.first_step == 4 * (TRAIN_STEPS + EVAL_STEPS) - 1  # the 4th pass's end
    assert f"step {offline.first_step} " in details
    assert "none learning (z >= 2, 2x gain in 1 or 3 passes)" in details

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

"""RegressionWorseThanMean in the serverless evaluator on moto: it fires as the steps arrive one
notification at a time (every validation pass since the start is history it reads), at the step
``invoke_rule`` names over the whole trial, and stays quiet on the twin whose predictions beat the mean."""

from __future__ import annotations

import numpy as np
import pytest
from evaluator_stack import TRIAL, Stack
from rule_runs import run_in_evaluator

from tornasole.modes import ModeKeys
from tornasole.rules import create_rule, invoke_rule
from tornasole.trials import create_trial

# moto as the local mode runs it: the rule runs are long, and their claim is the verdicts (conftest)
pytestmark = pytest.mark.usefixtures("moto_as_local_mode")

EPOCHS, TRAIN_STEPS, EVAL_STEPS = 5, 2, 2
RULE = {"RuleConfigurationName": "RegressionWorseThanMean", "RuleParameters": {"max_r2": "-0.25"}}
COLLECTIONS = {
    "losses": {"name": "losses", "include_regex": ["[Ll]oss_(?!input).*output"]},
    "loss_inputs": {"name": "loss_inputs", "include_regex": ["[Ll]oss_input_[01]$"]},
}


def _run(stack: Stack, r2: float) -> dict[str, tuple[str, str]]:
    """Epochs of TRAIN steps, each followed by a validation pass whose predictions have R^2 ``r2``."""
    target = np.random.default_rng(3).normal(size=(16, 4)).astype(np.float32)
    pred = (target + np.sqrt(1.0 - r2) * (target - target.mean(axis=0))).astype(np.float32)

    def mode_of(step: int) -> ModeKeys:
        return ModeKeys.TRAIN if step % (TRAIN_STEPS + EVAL_STEPS) < TRAIN_STEPS else ModeKeys.EVAL

    def tensors(step: int) -> dict[str, np.ndarray]:
        saved = {"MSELoss_output_0": np.float32(1.0)}
        if mode_of(step) == ModeKeys.EVAL:
            saved.update({"MSELoss_input_0": pred, "MSELoss_input_1": target})
        return saved

    steps = EPOCHS * (TRAIN_STEPS + EVAL_STEPS)
    return run_in_evaluator(stack, [RULE], steps, tensors, collections=COLLECTIONS, mode_of=mode_of)


def test_a_model_worse_than_the_mean_fires_in_the_evaluator_as_offline(stack: Stack) -> None:
    status, details = _run(stack, r2=-1.0)["RegressionWorseThanMean"]
    assert status == "IssuesFound", details
    offline = invoke_rule(create_rule("RegressionWorseThanMean", create_trial(TRIAL), max_r2="-0.25"))
    assert (
        offline.first_step == 3 * (TRAIN_STEPS + EVAL_STEPS) + TRAIN_STEPS + EVAL_STEPS - 1
    )  # 4th pass's end
    assert f"step {offline.first_step} " in details
    assert "MSELoss_input_0 against MSELoss_input_1" in details


def test_a_model_that_beats_the_mean_is_quiet_in_the_evaluator(stack: Stack) -> None:
    status, details = _run(stack, r2=0.3)["RegressionWorseThanMean"]
    assert status == "NoIssuesFound", details
    assert not details.startswith("NothingEvaluated"), details  # it read the prediction and target, judged

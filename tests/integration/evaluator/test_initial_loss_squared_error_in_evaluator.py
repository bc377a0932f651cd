"""InitialLossTooHigh on a squared-error loss in the serverless evaluator on moto: the first step's target
(``MSELoss_input_1``) travels with the run's first steps, so the evaluator fires at step 0 as
``invoke_rule`` does over the whole trial, stays quiet on a start at the targets' mean square, and says
which tensor is missing on a run that saved no target."""

from __future__ import annotations

import numpy as np
from evaluator_stack import TRIAL, Stack
from rule_runs import run_in_evaluator

from tornasole.rules import create_rule, invoke_rule
from tornasole.trials import create_trial

STEPS = 6
#: the squared-error check is opt-in: these runs turn it on at its measured factor
PARAMS = {"factor": "1.4", "squared_error_factor": "4"}
RULE = {"RuleConfigurationName": "InitialLossTooHigh", "RuleParameters": PARAMS}
COLLECTIONS = {
    "losses": {"name": "losses", "include_regex": ["[Ll]oss_(?!input).*output"]},
    "loss_inputs": {"name": "loss_inputs", "include_regex": ["[Ll]oss_input_[01]$"]},
}


def _run(stack: Stack, first_loss_x: float, save_target: bool = True) -> dict[str, tuple[str, str]]:
    """TRAIN steps whose targets have mean square 4; the first loss is ``first_loss_x`` x that, then 1."""
    target = np.full((16, 2), 2.0, dtype=np.float32)

    def tensors(step: int) -> dict[str, np.ndarray]:
        saved = {"MSELoss_output_0": np.float32(4.0 * first_loss_x if step == 0 else 1.0)}
        if save_target:
            saved.update({"MSELoss_input_0": np.zeros_like(target), "MSELoss_input_1": target})
        return saved

    return run_in_evaluator(stack, [RULE], STEPS, tensors, collections=COLLECTIONS)


def test_a_squared_error_far_above_its_targets_mean_square_fires_in_the_evaluator_as_offline(
    stack: Stack,
) -> None:
    status, details = _run(stack, first_loss_x=10.0)["InitialLossTooHigh"]
    assert status == "IssuesFound", details
    offline = invoke_rule(create_rule("InitialLossTooHigh", create_trial(TRIAL), **PARAMS))
    assert offline.first_step == 0
    assert "step 0 " in details
    assert (
        "is 10x the chance level 4 (the mean square of the first batch's targets MSELoss_input_1" in details
    )


def test_a_start_at_the_targets_mean_square_is_quiet_in_the_evaluator(stack: Stack) -> None:
    status, details = _run(stack, first_loss_x=1.0)["InitialLossTooHigh"]
    assert status == "NoIssuesFound", details
    assert not details.startswith("NothingEvaluated"), details


def test_a_run_without_its_target_is_not_judged_in_the_evaluator(stack: Stack) -> None:
    status, details = _run(stack, first_loss_x=10.0, save_target=False)["InitialLossTooHigh"]
    assert status == "NoIssuesFound", details
    outcome = create_rule("InitialLossTooHigh", create_trial(TRIAL), **PARAMS).evaluate(0)
    assert outcome.skipped
    assert "MSELoss_input_1 at step 0 (the target of MSELoss_output_0" in outcome.details

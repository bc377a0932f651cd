"""RegressionWorseThanMean in the serverless evaluator on moto: it fires as the steps arrive one
notification at a time (every validation pass since the start is history it reads), at the step
``invoke_rule`` names over the whole trial, and stays quiet on the twin whose predictions beat the mean."""

from __future__ import annotations

import numpy as np
from evaluator_stack import TRIAL, Stack
from test_completion import summary

from tornasole.format.writer import StepWriter
from tornasole.jobs import TornasoleJobs
from tornasole.modes import ModeKeys
from tornasole.rules import create_rule, invoke_rule
from tornasole.trials import create_trial

EPOCHS, TRAIN_STEPS, EVAL_STEPS = 5, 2, 2
RULE = {"RuleConfigurationName": "RegressionWorseThanMean", "RuleParameters": {"max_r2": "-0.25"}}
COLLECTIONS = {
    "losses": {"name": "losses", "include_regex": ["[Ll]oss_(?!input).*output"]},
    "loss_inputs": {"name": "loss_inputs", "include_regex": ["[Ll]oss_input_[01]$"]},
}


def _run(stack: Stack, r2: float) -> dict[str, tuple[str, str]]:
    """Epochs of TRAIN steps, each followed by a validation pass whose predictions have R^2 ``r2``."""
    TornasoleJobs().register_job("my-job", TRIAL, [RULE])
    stack.writer().write_collections(COLLECTIONS, 1)
    target = np.random.default_rng(3).normal(size=(16, 4)).astype(np.float32)
    pred = target + np.sqrt(1.0 - r2) * (target - target.mean(axis=0))
    step = train = evals = 0
    for _ in range(EPOCHS):
        for mode, count in ((ModeKeys.TRAIN, TRAIN_STEPS), (ModeKeys.EVAL, EVAL_STEPS)):
            for _ in range(count):
                mode_step = train if mode == ModeKeys.TRAIN else evals
                sw = StepWriter(step, "worker_0", mode=mode, mode_step=mode_step)
                sw.add_tensor("MSELoss_output_0", np.float32(1.0), wall_time=1.0)
                if mode == ModeKeys.EVAL:
                    sw.add_tensor("MSELoss_input_0", pred.astype(np.float32), wall_time=1.0)
                    sw.add_tensor("MSELoss_input_1", target, wall_time=1.0)
                stack.writer().write_step(sw)
                for note in stack.notifications():
                    stack.deliver(note)
                step += 1
                train, evals = (train + 1, evals) if mode == ModeKeys.TRAIN else (train, evals + 1)
    stack.write_end()
    for note in stack.notifications():
        stack.deliver(note)
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    return summary()


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

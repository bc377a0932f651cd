"""Rules reading earlier steps get the window they declare, and the same verdicts as a whole-run read."""

from __future__ import annotations

import numpy as np
import pytest
from evaluator_stack import TRIAL, Stack

from tornasole.format.writer import StepWriter
from tornasole.jobs import TornasoleJobs
from tornasole.modes import ModeKeys
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.loss_not_decreasing import LossNotDecreasing
from tornasole.rules.builtin.overtraining import Overtraining
from tornasole.trials import create_trial

# moto as the local mode runs it: the rule runs are long, and their claim is the verdicts (conftest)
pytestmark = pytest.mark.usefixtures("moto_as_local_mode")

STEPS = 30


def write_interleaved_run(stack: Stack) -> None:
    """TRAIN on even steps (loss keeps falling), EVAL on odd steps (loss flat from EVAL step 2 on)."""
    stack.write_collections()
    for step in range(STEPS):
        mode, mode_step = (ModeKeys.TRAIN, step // 2) if step % 2 == 0 else (ModeKeys.EVAL, step // 2)
        loss = 20.0 - 0.5 * mode_step if mode == ModeKeys.TRAIN else max(5.0 - mode_step, 3.0)
        sw = StepWriter(step, "worker_0", mode=mode, mode_step=mode_step)
        sw.add_tensor("loss", np.float32(loss), wall_time=1.0)
        stack.writer().write_step(sw)


def test_overtraining_defaults_need_more_than_ten_earlier_steps_and_get_them(stack: Stack) -> None:
    # GIVEN Overtraining with its defaults: patience_validation=10 EVAL steps, i.e. 22 interleaved steps
    TornasoleJobs().register_job(
        "my-job", TRIAL, [{"RuleConfigurationName": "Overtraining", "RuleParameters": {}}]
    )
    write_interleaved_run(stack)
    whole = invoke_rule(Overtraining(create_trial(TRIAL)), end_step=STEPS).fired_steps
    assert whole == [25, 27, 29]  # EVAL steps 12, 13, 14: no improvement over the last 10 EVAL steps
    assert Overtraining(create_trial(TRIAL)).history_steps() == 22
    # WHEN the evaluator judges each step as its notification arrives
    for note in stack.notifications():
        stack.deliver(note)
    # THEN it fires at exactly the same steps (a 10-step window would hold only 5 EVAL losses: no fire)
    records = TornasoleJobs().rule_evaluations("my-job", "Overtraining")
    assert [r["step"] for r in records] == list(range(STEPS))
    assert [r["step"] for r in records if r["fired"]] == whole
    assert not any(r.get("error") for r in records)


def test_a_rule_comparing_with_the_start_sees_the_start_long_after_the_recent_window(stack: Stack) -> None:
    # GIVEN a healthy run: the loss halves over the first ten steps and then stays there, for 100 steps
    # (far more than the recent window the evaluator loads for LossNotDecreasing: 2 * (10 + 5) = 30)
    params = {"reference": "first", "window": "5", "num_steps": "10", "mode": "TRAIN"}
    TornasoleJobs().register_job(
        "my-job",
        TRIAL,
        [
            {
                "RuleConfigurationName": "LossNotDecreasing",
                "RuleParameters": {"rule_to_invoke": "LossNotDecreasing", **params},
            }
        ],
    )
    stack.write_collections()
    for step in range(100):
        sw = StepWriter(step, "worker_0", mode=ModeKeys.TRAIN, mode_step=step)
        sw.add_tensor("loss", np.float32(10.0 if step < 10 else 5.0), wall_time=1.0)
        stack.writer().write_step(sw)
    whole = invoke_rule(LossNotDecreasing(create_trial(TRIAL), **params), end_step=100).fired_steps
    assert whole == []  # 5.0 is half the run's first loss: it came down
    # WHEN the evaluator judges each step as its notification arrives
    for note in stack.notifications():
        stack.deliver(note)
    # THEN it agrees with the whole-run read: the trial of a late step also holds the run's first steps
    records = TornasoleJobs().rule_evaluations("my-job", "LossNotDecreasing")
    assert len(records) == 100
    assert [r["step"] for r in records if r["fired"]] == whole
    assert not any(r.get("error") for r in records)

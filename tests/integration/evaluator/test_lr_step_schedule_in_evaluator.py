"""LearningRateDiscontinuity with the recommended parameters in the serverless evaluator on moto (issue #29):
the steps arrive one notification at a time, so the step of a drop is evaluated before the next step has
landed. A step schedule's drops (a warmup, then x0.1 at two milestones) stay quiet; a resume that restarts
the warmup is judged when the next step lands, and fires there, at the step ``invoke_rule`` names over
the whole trial, never at the drop itself."""

from __future__ import annotations

import numpy as np
import pytest
from evaluator_stack import Stack
from rule_runs import assert_all_quiet, assert_each_fires_as_offline, run_in_evaluator

from tornasole.rules.builtin.recommended import recommended_rules

# moto as the local mode runs it: the rule runs are long, and their claim is the verdicts (conftest)
pytestmark = pytest.mark.usefixtures("moto_as_local_mode")

STEPS = 24
RESUME = 14
RULES = [c for c in recommended_rules() if c["RuleConfigurationName"] == "LearningRateDiscontinuity"]


def _warmup(step: int) -> float:
    return 1e-2 * min(1.0, (step + 1) / 5)


def _step_schedule(step: int) -> float:
    """A warmup of 5 steps, then ``MultiStepLR(milestones=[10, 18], gamma=0.1)``."""
    return _warmup(step) * 0.1 ** sum(step >= m for m in (10, 18))


def _restarted(step: int) -> float:
    """The warmup then the rate held; resumed at ``RESUME`` without the scheduler: the warmup starts over."""
    return _warmup(step if step < RESUME else step - RESUME)


def _run(stack: Stack, rate) -> dict[str, tuple[str, str]]:
    return run_in_evaluator(stack, RULES, STEPS, lambda step: {"scalar/lr/0": np.float32(rate(step))})


def test_step_schedule_drops_are_quiet_in_the_evaluator(stack: Stack) -> None:
    got = _run(stack, _step_schedule)
    assert_all_quiet(got, RULES)
    assert not got["LearningRateDiscontinuity"][1].startswith("NothingEvaluated")


def test_a_restarted_warmup_fires_when_the_next_step_lands_as_offline(stack: Stack) -> None:
    got = _run(stack, _restarted)
    assert_each_fires_as_offline(got, RULES, {"LearningRateDiscontinuity": RESUME + 1})
    assert f"at step {RESUME} " in got["LearningRateDiscontinuity"][1]

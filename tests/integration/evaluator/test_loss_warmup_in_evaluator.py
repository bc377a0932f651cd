"""LossNotDecreasing with its calibrated opt-in parameters in the serverless evaluator on moto (issue #29):
a loss at chance while the saved learning rate warms up from 0 stays quiet as the steps arrive one
notification at a time (the rule reads the rate ``num_steps`` steps back, within the history it loads), and
the same flat loss once the rate stops rising fires at the step ``invoke_rule`` names over the whole trial."""

from __future__ import annotations

import math

import numpy as np
import pytest
from evaluator_stack import Stack
from rule_runs import assert_each_fires_as_offline, run_in_evaluator

from tornasole.rules.builtin.recommended import opt_in_rules

# moto as the local mode runs it: the rule runs are long, and their claim is the verdicts (conftest)
pytestmark = pytest.mark.usefixtures("moto_as_local_mode")

# the calibrated configuration on a shorter horizon (num_steps 10, patience 2: 51 steps instead of 121, the
# evaluator re-reading from the start at each one); without the deferral it fires at TRAIN step 20
RULES = [
    {**c, "RuleParameters": {**c["RuleParameters"], "num_steps": "10", "patience": "2"}}
    for c in opt_in_rules()
    if c["RuleConfigurationName"] == "LossNotDecreasing"
]
WARMUP = 40
COLLECTIONS = {
    "losses": {"name": "losses", "include_regex": ["loss$"]},
    "scalars": {"name": "scalars", "include_regex": ["^scalar/"]},
}


def _run(stack: Stack, steps: int) -> dict[str, tuple[str, str]]:
    def tensors(step: int) -> dict[str, np.ndarray]:
        return {
            "loss": np.float32(math.log(10) + 0.02 * math.sin(1.7 * step)).reshape(1),
            "scalar/lr/0": np.float32(1e-3 * min(step, WARMUP) / WARMUP),
        }

    return run_in_evaluator(stack, RULES, steps, tensors, collections=COLLECTIONS)


def test_a_flat_loss_is_quiet_during_the_warmup_and_fires_after_it_in_the_evaluator_as_offline(
    stack: Stack,
) -> None:
    got = _run(stack, WARMUP + 11)
    # quiet through the warmup (without the deferral it fires at TRAIN step 20), then the first evaluation
    # point after the rate stopped rising: TRAIN step 50 (40 compares a rising rate); one run covers both
    assert_each_fires_as_offline(got, RULES, {"LossNotDecreasing": 50})

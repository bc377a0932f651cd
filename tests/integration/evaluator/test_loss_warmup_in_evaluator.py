"""LossNotDecreasing with the recommended parameters in the serverless evaluator on moto (issue #29): a loss
at chance while the saved learning rate warms up from 0 stays quiet as the steps arrive one notification at
a time (the rule reads the rate ``num_steps`` steps back, within the history it loads), and the same flat
loss once the rate stops rising fires at the step ``invoke_rule`` names over the whole trial."""

from __future__ import annotations

import math

import numpy as np
from evaluator_stack import Stack
from rule_runs import assert_all_quiet, assert_each_fires_as_offline, run_in_evaluator

from tornasole.rules.builtin.recommended import recommended_rules

RULES = [c for c in recommended_rules() if c["RuleConfigurationName"] == "LossNotDecreasing"]
WARMUP = 100  # the recommended patience's first possible firing: TRAIN step 80
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


def test_a_flat_loss_during_a_warmup_from_zero_is_quiet_in_the_evaluator(stack: Stack) -> None:
    got = _run(stack, WARMUP)
    assert_all_quiet(got, RULES)
    assert not got["LossNotDecreasing"][1].startswith("NothingEvaluated")


def test_a_loss_flat_after_the_warmup_fires_in_the_evaluator_as_offline(stack: Stack) -> None:
    got = _run(stack, WARMUP + 21)
    # the first evaluation point after the rate stopped rising: TRAIN step 120 (100 compares a rising rate)
    assert_each_fires_as_offline(got, RULES, {"LossNotDecreasing": 120})

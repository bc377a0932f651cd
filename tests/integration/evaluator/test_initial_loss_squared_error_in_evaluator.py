"""InitialLossTooHigh on a squared-error loss in the serverless evaluator on moto, with the recommended
parameters: the first step's target (``MSELoss_input_1``) and weights travel with the run's first steps, so
the evaluator fires at step 0 as ``invoke_rule`` does over the whole trial when the weights are beyond any
standard initialisation, stays quiet on a start with standard weights however high (the tier that ignores
the weights is off), and says which tensor is missing on a run with large weights that saved no target."""

from __future__ import annotations

import math

import numpy as np
import pytest
from evaluator_stack import TRIAL, Stack
from rule_runs import run_in_evaluator

from tornasole.rules import create_rule, invoke_rule, recommended_rules
from tornasole.trials import create_trial

STEPS = 6
COLLECTIONS = {
    "losses": {"name": "losses", "include_regex": ["[Ll]oss_(?!input).*output"]},
    "loss_inputs": {"name": "loss_inputs", "include_regex": ["[Ll]oss_input_[01]$"]},
    "weights": {"name": "weights", "include_regex": [r"\.weight$"]},
}


def _rule() -> dict:
    (conf,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == "InitialLossTooHigh"]
    return conf


PARAMS = {k: v for k, v in _rule()["RuleParameters"].items() if k != "rule_to_invoke"}


def _weight(fan_in: int, fan_out: int, scale: float, seed: int) -> np.ndarray:
    """A PyTorch ``(out, in)`` weight whose std x sqrt(fan-in) is ``scale``."""
    w = np.random.default_rng(seed).standard_normal((fan_out, fan_in))
    return (w / w.std() * scale / math.sqrt(fan_in)).astype(np.float32)


def _run(stack: Stack, first_loss_x: float, scale: float, save_target: bool = True) -> tuple[str, str]:
    """TRAIN steps whose targets have mean square 4; the first loss is ``first_loss_x`` x that, then 1; three
    weights at std x sqrt(fan-in) ``scale``."""
    target = np.full((16, 2), 2.0, dtype=np.float32)

    def tensors(step: int) -> dict[str, np.ndarray]:
        saved = {"MSELoss_output_0": np.float32(4.0 * first_loss_x if step == 0 else 1.0)}
        saved.update({f"Net_fc{i}.weight": _weight(32, 32, scale, i) for i in range(3)})
        if save_target:
            saved.update({"MSELoss_input_0": np.zeros_like(target), "MSELoss_input_1": target})
        return saved

    return run_in_evaluator(stack, [_rule()], STEPS, tensors, collections=COLLECTIONS)["InitialLossTooHigh"]


def test_a_squared_error_above_its_level_with_large_weights_fires_in_the_evaluator_as_offline(
    stack: Stack,
) -> None:
    status, details = _run(stack, first_loss_x=3.0, scale=4.6)  # DeepFD's x8 of PyTorch's default
    assert status == "IssuesFound", details
    offline = invoke_rule(create_rule("InitialLossTooHigh", create_trial(TRIAL), **PARAMS))
    assert offline.first_step == 0
    assert "step 0 " in details
    assert "is 3x the chance level 4 (the mean square of the first batch's targets MSELoss_input_1" in details
    assert "squared_error_factor 2, with weights beyond any standard initialisation" in details


@pytest.mark.parametrize(("first_loss_x", "scale"), [(1.0, 4.6), (10.0, 1.41)])
def test_a_start_at_its_level_or_with_standard_weights_is_quiet_in_the_evaluator(
    stack: Stack, first_loss_x: float, scale: float
) -> None:
    status, details = _run(stack, first_loss_x=first_loss_x, scale=scale)
    assert status == "NoIssuesFound", details
    assert not details.startswith("NothingEvaluated"), details


def test_a_run_with_large_weights_without_its_target_is_not_judged_in_the_evaluator(stack: Stack) -> None:
    status, details = _run(stack, first_loss_x=10.0, scale=4.6, save_target=False)
    assert status == "NoIssuesFound", details
    outcome = create_rule("InitialLossTooHigh", create_trial(TRIAL), **PARAMS).evaluate(0)
    assert outcome.skipped
    assert "MSELoss_input_1 at step 0 (the target of MSELoss_output_0" in outcome.details

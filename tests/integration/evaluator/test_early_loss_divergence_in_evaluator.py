"""EarlyLossDivergence in the serverless evaluator on moto: a Keras batch cross-entropy that climbs to 2.5x
chance at the third training step, with the validation pass after it still at chance and the next one too
(stalled), fires at the first training step after that second pass, as ``invoke_rule`` finds over the whole
trial (the first loss and the passes are leading steps the evaluator loads); the twin whose loss falls below
chance by the second pass stays quiet after judging."""

from __future__ import annotations

import math

import numpy as np
from evaluator_stack import Stack
from rule_runs import assert_each_fires_as_offline, run_in_evaluator

from tornasole.modes import ModeKeys
from tornasole.rules import recommended_rules

COLLECTIONS = {
    "losses": {"name": "losses", "include_regex": ["^batch_loss/"]},
    "loss_inputs": {"name": "loss_inputs", "include_regex": ["^(predictions|labels)$"]},
}
LOSS = "batch_loss/SparseCategoricalCrossentropy"
CHANCE = math.log(5)
RULE = {
    "RuleConfigurationName": "EarlyLossDivergence",
    "RuleParameters": {"rule_to_invoke": "EarlyLossDivergence", "factor": "2", "within_steps": "20"},
}
#: four training steps, a validation pass of two, two training steps, a pass of two, two training steps
MODES = (
    [ModeKeys.TRAIN] * 4
    + [ModeKeys.EVAL] * 2
    + [ModeKeys.TRAIN] * 2
    + [ModeKeys.EVAL] * 2
    + [ModeKeys.TRAIN] * 2
)


#: the recommended set's configuration (``stalled_passes=2``) and a third pass after the second one
RECOMMENDED_RULE = next(c for c in recommended_rules() if c["RuleConfigurationName"] == "EarlyLossDivergence")
THREE_PASSES = MODES + [ModeKeys.EVAL] * 2 + [ModeKeys.TRAIN] * 2


def _run_rules(stack: Stack, ratios: list[float], rules: list[dict], modes: list[ModeKeys]) -> dict:
    rng = np.random.default_rng(3)

    def tensors(step: int) -> dict[str, np.ndarray]:
        return {
            LOSS: np.array([ratios[step] * CHANCE], np.float32),
            "predictions": rng.dirichlet(np.ones(5), size=16).astype(np.float32),
            "labels": rng.integers(0, 5, size=16),
        }

    return run_in_evaluator(
        stack, rules, len(modes), tensors, collections=COLLECTIONS, mode_of=lambda step: modes[step]
    )


def _run(
    stack: Stack, ratios: list[float], rule: dict = RULE, modes: list[ModeKeys] = MODES
) -> tuple[str, str]:
    return _run_rules(stack, ratios, [rule], modes)["EarlyLossDivergence"]


def test_a_loss_that_climbs_to_twice_chance_and_stays_there_fires_as_offline(stack: Stack) -> None:
    got = {
        "EarlyLossDivergence": _run(stack, [1.0, 1.5, 2.5, 1.1, 1.0, 1.05, 1.0, 1.0, 1.02, 0.99, 0.9, 0.9])
    }
    assert_each_fires_as_offline(got, [RULE], {"EarlyLossDivergence": 10})
    assert "2.5x its start" in got["EarlyLossDivergence"][1]
    assert "no better than chance" in got["EarlyLossDivergence"][1]


def test_a_loss_that_recovers_below_chance_by_the_second_pass_is_quiet(stack: Stack) -> None:
    status, details = _run(stack, [1.0, 1.5, 2.5, 1.1, 1.0, 1.02, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3])
    assert status == "NoIssuesFound", details
    assert not details.startswith("NothingEvaluated"), details


def test_the_recommended_configuration_fires_after_a_third_pass_at_chance_as_offline(stack: Stack) -> None:
    stalled = [1.0, 1.5, 2.5, 1.1, 1.0, 1.05, 1.0, 1.0, 1.02, 0.99, 0.9, 0.9, 1.01, 1.0, 0.9, 0.9]
    got = {"EarlyLossDivergence": _run(stack, stalled, RECOMMENDED_RULE, THREE_PASSES)}
    assert_each_fires_as_offline(got, [RECOMMENDED_RULE], {"EarlyLossDivergence": 14})


def test_the_recommended_configuration_is_quiet_on_a_run_that_leaves_chance_at_its_third_pass(
    stack: Stack,
) -> None:
    # bench/detection's survivor: one sigmoid layer under SGD 0.5 with momentum, passes at 2.35x, 0.999x
    # and 0.86x chance, then accuracy 1.0 (stalled_passes=1 fires on it after the second pass)
    survivor = [1.0, 1.5, 2.5, 2.4, 2.36, 2.34, 1.2, 1.1, 1.0, 0.998, 0.9, 0.9, 0.87, 0.85, 0.8, 0.7]
    one_pass = {**RULE, "RuleConfigurationName": "StalledOnePass"}
    got = _run_rules(stack, survivor, [RECOMMENDED_RULE, one_pass], THREE_PASSES)
    status, details = got["EarlyLossDivergence"]
    assert status == "NoIssuesFound", details
    assert not details.startswith("NothingEvaluated"), details
    assert got["StalledOnePass"][0] == "IssuesFound", got["StalledOnePass"]

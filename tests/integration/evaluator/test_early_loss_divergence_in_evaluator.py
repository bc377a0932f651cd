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


def _run(stack: Stack, ratios: list[float]) -> tuple[str, str]:
    rng = np.random.default_rng(3)

    def tensors(step: int) -> dict[str, np.ndarray]:
        return {
            LOSS: np.array([ratios[step] * CHANCE], np.float32),
            "predictions": rng.dirichlet(np.ones(5), size=16).astype(np.float32),
            "labels": rng.integers(0, 5, size=16),
        }

    return run_in_evaluator(
        stack, [RULE], len(MODES), tensors, collections=COLLECTIONS, mode_of=lambda step: MODES[step]
    )["EarlyLossDivergence"]


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

"""UnchangedWeights and WeightUpdateRatio with the recommended parameters in the serverless evaluator on
moto (issue #29): a cosine schedule to exactly 0, whose last updates round to nothing in float32, stays
quiet as the steps arrive one notification at a time (the fade-out reads ``fade_out_steps`` saved steps of
history, past the validation phases in between), and a rate a bug zeroed after full-size updates fires at
the step ``invoke_rule`` names over the whole trial."""

from __future__ import annotations

import math

import numpy as np
import pytest
from evaluator_stack import Stack
from rule_runs import assert_all_quiet, assert_each_fires_as_offline, run_in_evaluator

from tornasole.modes import ModeKeys
from tornasole.rules.builtin.recommended import recommended_rules

# moto as the local mode runs it: the rule runs are long, and their claim is the verdicts (conftest)
pytestmark = pytest.mark.usefixtures("moto_as_local_mode")

STEPS = 90  # global steps; every tenth a validation step
RULES = [
    c for c in recommended_rules() if c["RuleConfigurationName"] in ("UnchangedWeights", "WeightUpdateRatio")
]
COLLECTIONS = {"weights": {"name": "weights", "include_regex": ["^weights/"]}}


def _mode_of(step: int) -> ModeKeys:
    return ModeKeys.EVAL if step % 10 == 9 else ModeKeys.TRAIN


def _run(stack: Stack, rate, steps: int = STEPS, layers: int = 1) -> dict[str, tuple[str, str]]:
    """A BatchNorm scale (16 float32 entries near 1; ``layers`` of them side by side, 16 entries each) that
    each TRAIN step moves by ``rate(train_step)`` per entry in a random direction (an Adam-like step)."""
    rng = np.random.default_rng(3)
    w = (1.0 + 0.05 * rng.normal(size=16 * layers)).astype(np.float32)
    train_steps = sum(_mode_of(s) == ModeKeys.TRAIN for s in range(steps))
    done = 0

    def tensors(step: int) -> dict[str, np.ndarray]:
        nonlocal w, done
        if _mode_of(step) == ModeKeys.TRAIN:
            lr = rate(done, train_steps)
            w = (w - np.float32(lr) * np.sign(rng.normal(size=w.size)).astype(np.float32)).astype(np.float32)
            done += 1
        if layers == 1:
            return {"weights/bn.gamma": w.copy()}
        return {f"weights/bn{i}.gamma": w[16 * i : 16 * i + 16].copy() for i in range(layers)}

    return run_in_evaluator(stack, RULES, steps, tensors, collections=COLLECTIONS, mode_of=_mode_of)


def _cosine_to_zero(t: int, total: int) -> float:
    return 5e-5 * 0.5 * (1 + math.cos(math.pi * (t + 1) / total))


def test_a_cosine_to_zero_is_quiet_in_the_evaluator(stack: Stack) -> None:
    got = _run(stack, _cosine_to_zero)
    assert_all_quiet(got, RULES)
    for _name, (_status, details) in got.items():
        assert not details.startswith("NothingEvaluated"), details


def test_a_rate_zeroed_after_full_size_updates_fires_in_the_evaluator_as_offline(stack: Stack) -> None:
    got = _run(stack, lambda t, _total: 5e-4 if t < 20 else 0.0, steps=32)  # fires by step 23: no need for 90
    # global steps 0-8 and 10-18 train, 9 validates: TRAIN step 20 (the first without an update) is
    # global step 22; three equal saved TRAIN steps (19, 20, 21) end at global step 23
    assert_each_fires_as_offline(got, RULES, {"WeightUpdateRatio": 22, "UnchangedWeights": 23})


def test_a_whole_model_that_stops_fires_one_window_later_in_the_evaluator_as_offline(stack: Stack) -> None:
    # two layers: a window in which neither moved is a window without an update (skip_idle_model), so
    # WeightUpdateRatio waits for the second such window (global step 23), as invoke_rule does
    got = _run(stack, lambda t, _total: 5e-4 if t < 20 else 0.0, steps=32, layers=2)
    assert_each_fires_as_offline(got, RULES, {"WeightUpdateRatio": 23, "UnchangedWeights": 23})

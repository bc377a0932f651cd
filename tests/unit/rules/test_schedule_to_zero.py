"""A learning-rate schedule that ends at exactly 0 (issue #29: Keras's ``CosineDecay`` and PyTorch's
per-step ``CosineAnnealingLR`` with ``eta_min`` 0): the weights' last updates fall below what float32 can
represent near 1 and round to nothing. That is a schedule's end, not a frozen layer: UnchangedWeights and
WeightUpdateRatio with the recommended parameters stay quiet on it, and still fire on a rate a bug zeroed
after full-size updates and on parameters the optimiser never sees. The traces are written with the numpy
API; each "quiet" test fails on the rules before the change (asserted in the test)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tornasole.exceptions import RuleParameterError
from tornasole.modes import TRAIN
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.recommended import RECOMMENDED
from tornasole.rules.builtin.weight_update_ratio import WeightUpdateRatio
from tornasole.rules.generic import UnchangedTensor

STEPS = 480  # saved TRAIN steps (every 4th of 1,920: convbn_keras's batch-4 run)
PEAK = 5e-4  # Adam's rate at the top of the cosine (a step moves each entry by about the rate)


def _adam_like(rates: list[float], seed: int = 0) -> dict:
    """Saved TRAIN steps 0, 4, 8 ... of a BatchNorm scale (16 entries near 1, float32) that four Adam-like
    steps move between saved steps, each entry by the step's rate in a random direction."""
    rng = np.random.default_rng(seed)
    w = (1.0 + 0.05 * rng.normal(size=16)).astype(np.float32)
    steps = {0: (TRAIN, 0, {"weights/bn.gamma": w.copy()})}
    for i in range(1, STEPS):
        for k in range(4):
            lr = rates[4 * (i - 1) + k]
            w = (w - np.float32(lr) * np.sign(rng.normal(size=16)).astype(np.float32)).astype(np.float32)
        steps[4 * i] = (TRAIN, 4 * i, {"weights/bn.gamma": w.copy()})
    return steps


def _cosine_to_zero() -> list[float]:
    total = 4 * (STEPS - 1)  # the last saved step is the schedule's end
    return [PEAK * 0.5 * (1 + math.cos(math.pi * t / total)) for t in range(total)]


def _params(name: str) -> dict:
    (params,) = [p for conf, _, p in RECOMMENDED if conf == name]
    return dict(params)


def test_a_cosine_to_zero_has_its_last_updates_round_to_nothing():
    trace = _adam_like(_cosine_to_zero())
    last = trace[4 * (STEPS - 1)][2]["weights/bn.gamma"]
    before = trace[4 * (STEPS - 2)][2]["weights/bn.gamma"]
    assert np.array_equal(last, before)  # the premise of the tests below: float32 rounds them away


def test_unchanged_weights_passes_over_a_long_cosine_tail(trial_factory):
    trial = trial_factory(_adam_like(_cosine_to_zero()), {"weights": ["^weights/"]})
    params = _params("UnchangedWeights")
    assert params["fade_out_steps"] == "32"
    # before: the fade-out window of 16 saved steps did not reach back to the last visible change (without
    # fade_out_drift, which passes over this tail too: test_slow_tail_updates)
    assert invoke_rule(
        UnchangedTensor(trial, **{**params, "fade_out_steps": "16", "fade_out_drift": "False"})
    ).fired
    assert not invoke_rule(UnchangedTensor(trial, **params)).fired


def test_weight_update_ratio_passes_over_a_cosine_to_zero(trial_factory):
    trial = trial_factory(_adam_like(_cosine_to_zero()), {"weights": ["^weights/"]})
    params = _params("WeightUpdateRatio")
    assert params["fade_out_factor"] == "10"
    assert params["fade_out_steps"] == "32"
    before = invoke_rule(WeightUpdateRatio(trial, skip_frozen="True")).fired
    assert before
    assert before[0].step > 4 * (STEPS - 20)  # "updates vanished" at the schedule's tail
    assert not invoke_rule(WeightUpdateRatio(trial, **params)).fired


def test_weight_update_ratio_still_fires_on_a_rate_zeroed_after_full_size_updates(trial_factory):
    rates = [PEAK] * 40 + [0.0] * (4 * STEPS - 40)  # scheduler_zeroes_lr: full-size, then exactly 0
    trial = trial_factory(_adam_like(rates), {"weights": ["^weights/"]})
    fired = invoke_rule(WeightUpdateRatio(trial, **_params("WeightUpdateRatio"))).fired
    assert fired
    assert fired[0].step == 44  # the first saved step after the stop: as without fade_out_factor
    assert "small_threshold" in fired[0].details
    fired = invoke_rule(UnchangedTensor(trial, **_params("UnchangedWeights"))).fired
    assert fired
    assert fired[0].step == 48  # the third equal saved step: as without the options


def test_weight_update_ratio_still_fires_on_parameters_that_never_moved(trial_factory):
    trial = trial_factory(_adam_like([0.0] * (4 * STEPS)), {"weights": ["^weights/"]})
    fired = invoke_rule(WeightUpdateRatio(trial, **_params("WeightUpdateRatio"))).fired
    assert fired
    assert fired[0].step == 4
    fired = invoke_rule(UnchangedTensor(trial, **_params("UnchangedWeights"))).fired
    assert fired
    assert fired[0].step == 8


def test_fade_out_factor_is_validated(trial_factory):
    trial = trial_factory(_adam_like([0.0] * (4 * STEPS)), {"weights": ["^weights/"]})
    with pytest.raises(RuleParameterError, match="fade_out_factor"):
        WeightUpdateRatio(trial, fade_out_factor="-1")


def test_weight_update_ratio_still_fires_on_a_rate_too_low_ever_to_move_the_weights_visibly(trial_factory):
    # lr_too_low: every step moves each entry by at most a few units in the last place, so the ratios sit at
    # float32's resolution from the start, and now and then round to 0: no visible update ever shrank
    rng = np.random.default_rng(1)
    rates = list(rng.uniform(0.0, 6e-8, size=4 * STEPS))
    trace = _adam_like(rates)
    trial = trial_factory(trace, {"weights": ["^weights/"]})
    fired = invoke_rule(WeightUpdateRatio(trial, **_params("WeightUpdateRatio"))).fired
    assert fired
    assert fired[0].step == invoke_rule(WeightUpdateRatio(trial, skip_frozen="True")).fired[0].step

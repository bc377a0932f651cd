"""Gradient and weight rules on trials written from real PyTorch training (and synthetic where simpler)."""

from __future__ import annotations

import numpy as np
from rules_helpers import train_mlp

from tornasole.rules import invoke_rule
from tornasole.rules.generic import ExplodingTensor, PoorWeightInitialization, WeightUpdateRatio


def test_exploding_tensor_fires_when_learning_rate_is_too_high(trial_factory):
    # GIVEN a real training run with lr=0.5: the loss overflows, then gradients become NaN/Inf
    steps = train_mlp(steps=6, lr=0.5)
    trial = trial_factory(steps)
    summary = invoke_rule(ExplodingTensor(trial, collection_names="gradients"))
    assert summary.first_step == 4
    assert "gradients/fc1.weight has " in summary.fired[0].details
    assert summary.fired[0].values["nan_count"] + summary.fired[0].values["inf_count"] > 0
    # with no selection every tensor is inspected: the loss overflowed to Inf one step earlier
    everything = invoke_rule(ExplodingTensor(trial))
    assert everything.first_step == 3
    assert everything.fired[0].values["tensor"] == "loss"


def test_exploding_tensor_quiet_on_sane_learning_rate(trial_factory):
    trial = trial_factory(train_mlp(steps=4, lr=0.001))
    assert invoke_rule(ExplodingTensor(trial)).fired == []


def test_weight_update_ratio_fires_on_huge_updates_and_on_frozen_weights(trial_factory):
    w = np.ones((2, 2))
    trial = trial_factory({0: {"weights/w": w}, 1: {"weights/w": w * 1.01}, 2: {"weights/w": w * 50}})
    summary = invoke_rule(WeightUpdateRatio(trial))
    assert summary.first_step == 2
    assert summary.fired[0].values["previous_step"] == 1
    frozen = trial_factory({0: {"weights/w": w}, 1: {"weights/w": w * 1.01}, 2: {"weights/w": w * 1.01}})
    assert invoke_rule(WeightUpdateRatio(frozen)).first_step == 2


def test_weight_update_ratio_quiet_on_normal_training(trial_factory):
    trial = trial_factory(train_mlp(steps=4, lr=0.001))
    assert invoke_rule(WeightUpdateRatio(trial)).fired == []


def test_weight_update_ratio_num_steps_compares_further_back(trial_factory):
    w = np.ones(3)
    trial = trial_factory({s: {"weights/w": w * (1 + 0.3 * s)} for s in range(5)})
    # every step-to-step ratio is < 10; over 2 steps neither: quiet, but large_threshold=0.5 fires at 2
    assert invoke_rule(WeightUpdateRatio(trial, num_steps="2")).fired == []
    assert invoke_rule(WeightUpdateRatio(trial, num_steps="2", large_threshold="0.5")).first_step == 2


def _pwi_steps(relu_scales, grad_spread, losses):
    rng = np.random.default_rng(0)
    out = {}
    for s, loss in enumerate(losses):
        out[s] = {
            "l1_relu_input": rng.normal(0, relu_scales[0], (16, 4)),
            "l2_relu_input": rng.normal(0, relu_scales[1], (16, 4)),
            "gradients/w": rng.normal(0, grad_spread, 64),
            "loss": np.float32(loss),
        }
    return out


def test_poor_weight_initialization_fires_on_badly_scaled_layers(trial_factory):
    trial = trial_factory(_pwi_steps((1.0, 20.0), 1.0, [5, 4, 3]))
    summary = invoke_rule(PoorWeightInitialization(trial))
    assert summary.first_step == 0
    assert "variance" in summary.fired[0].details


def test_poor_weight_initialization_fires_when_loss_does_not_decrease_within_patience(trial_factory):
    trial = trial_factory(_pwi_steps((1.0, 1.2), 1.0, [5, 4, 4.5, 5, 5.5]))
    assert invoke_rule(PoorWeightInitialization(trial, patience="2")).first_step == 3


def test_poor_weight_initialization_quiet_on_good_init_and_after_first_steps(trial_factory):
    trial = trial_factory(_pwi_steps((1.0, 1.2), 1.0, [5, 4, 3, 2, 1]))
    assert invoke_rule(PoorWeightInitialization(trial, patience="2")).fired == []
    late = trial_factory(_pwi_steps((1.0, 20.0), 1.0, [5, 4, 3]))
    assert invoke_rule(PoorWeightInitialization(late, steps="0")).fired == []

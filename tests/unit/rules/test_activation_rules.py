"""Activation and tensor-statistics rules: DeadRelu, SaturatedActivation, AllZero, TensorVariance,
UnchangedTensor."""

from __future__ import annotations

import numpy as np
import pytest
from rules_helpers import train_mlp

from tornasole.exceptions import RuleParameterError
from tornasole.rules import invoke_rule
from tornasole.rules.generic import AllZero, DeadRelu, SaturatedActivation, TensorVariance, UnchangedTensor
from tornasole.rules.outcome import split_advice


def test_dead_relu_fires_for_a_layer_with_large_negative_bias(trial_factory):
    trial = trial_factory(train_mlp(steps=3, relu_bias=-50.0))
    summary = invoke_rule(DeadRelu(trial))
    assert summary.first_step == 0
    assert split_advice(summary.fired[0].details)[0].endswith(
        "100% of the 8 ReLUs in fc1_relu_output are active in fewer than 1% of 32 samples (step 0) "
        "(> threshold_layer 50%)"
    )


def test_dead_relu_quiet_on_normal_init(trial_factory):
    trial = trial_factory(train_mlp(steps=3))
    assert invoke_rule(DeadRelu(trial)).fired == []


def test_dead_relu_fires_from_the_step_where_units_die(trial_factory):
    alive = np.abs(np.random.default_rng(0).normal(size=(10, 4))) + 0.1
    half_dead = alive.copy()
    half_dead[:, :3] = 0.0
    trial = trial_factory({0: {"a_relu_output": alive}, 1: {"a_relu_output": half_dead}})
    assert invoke_rule(DeadRelu(trial, min_samples="10")).first_step == 1
    assert invoke_rule(DeadRelu(trial, min_samples="10", threshold_layer="80")).fired == []


def test_dead_relu_threshold_network_needs_most_units_dead_across_layers(trial_factory):
    # Layer a: 15 of 16 units dead (94%); layer b: all 16 alive. One layer is dead, the network is not
    # (15 of 32 units, 47%): quiet with threshold_network=60, while the per-layer reading fires.
    rng = np.random.default_rng(0)
    alive = np.abs(rng.normal(size=(64, 16))) + 0.1
    mostly_dead = alive.copy()
    mostly_dead[:, 1:] = 0.0
    one_layer = trial_factory({0: {"a_relu_output": mostly_dead, "b_relu_output": alive}})
    assert invoke_rule(DeadRelu(one_layer, threshold_layer="90")).first_step == 0
    assert invoke_rule(DeadRelu(one_layer, threshold_layer="90", threshold_network="60")).fired == []
    # Both layers mostly dead: 15 + 12 of 32 units (84%) fire, and the report says so.
    b_dead = alive.copy()
    b_dead[:, 4:] = 0.0
    dying = trial_factory({0: {"a_relu_output": mostly_dead, "b_relu_output": b_dead}})
    summary = invoke_rule(DeadRelu(dying, threshold_layer="90", threshold_network="60"))
    assert summary.first_step == 0
    assert "84.38% of the 2 layers' units together (>= threshold_network 60%)" in summary.fired[0].details


def test_dead_relu_rejects_a_threshold_network_outside_0_100(trial_factory):
    trial = trial_factory({0: {"a_relu_output": np.ones((4, 2))}})
    with pytest.raises(RuleParameterError, match="threshold_network"):
        DeadRelu(trial, threshold_network="120")


def test_saturated_activation_fires_on_saturated_tanh_inputs(trial_factory):
    ok = np.linspace(-2, 2, 40).reshape(10, 4)
    trial = trial_factory({0: {"l1_tanh_input": ok}, 1: {"l1_tanh_input": ok * 10 + np.sign(ok) * 20}})
    summary = invoke_rule(SaturatedActivation(trial))
    assert summary.first_step == 1
    assert "l1_tanh_input" in summary.fired[0].details


def test_saturated_activation_uses_sigmoid_bounds_and_ignores_other_tensors(trial_factory):
    x = np.full((4, 2), -20.0)  # saturated for tanh (< -9.5), not for sigmoid (> -23)
    trial = trial_factory({0: {"l1_sigmoid_input": x, "other_tanh": x}})
    assert invoke_rule(SaturatedActivation(trial)).fired == []


def test_all_zero_fires_on_all_zero_tensor(trial_factory):
    trial = trial_factory({0: {"out_a": np.ones(4)}, 1: {"out_a": np.zeros(4)}})
    assert invoke_rule(AllZero(trial, tensor_regex="out_.*")).first_step == 1


def test_all_zero_threshold_and_quiet_case(trial_factory):
    trial = trial_factory({0: {"out_a": np.array([0, 0, 0, 1.0])}})
    assert invoke_rule(AllZero(trial, tensor_regex="out_.*")).fired == []
    assert invoke_rule(AllZero(trial, tensor_regex="out_.*", threshold="75")).first_step == 0


def test_all_zero_requires_a_selection(trial_factory):
    trial = trial_factory({0: {"x": np.ones(1)}})
    with pytest.raises(RuleParameterError, match="AllZero: .*one of collection_names or tensor_regex"):
        AllZero(trial)


def test_tensor_variance_fires_above_max_and_below_min(trial_factory):
    rng = np.random.default_rng(1)
    trial = trial_factory({s: {"weights/w": rng.normal(0, 1 + 5 * (s == 2), 200)} for s in range(3)})
    assert invoke_rule(TensorVariance(trial, collection_names="weights", max_threshold="4")).first_step == 2
    assert invoke_rule(TensorVariance(trial, collection_names="weights", min_threshold="0.5")).fired == []
    assert invoke_rule(TensorVariance(trial, collection_names="weights", min_threshold="2")).first_step == 0


def test_tensor_variance_needs_a_threshold(trial_factory):
    trial = trial_factory({0: {"weights/w": np.ones(2)}})
    with pytest.raises(RuleParameterError, match="max_threshold"):
        TensorVariance(trial, collection_names="weights")


def test_unchanged_tensor_fires_on_frozen_weights(trial_factory):
    # GIVEN real training where fc1 is left out of the optimiser: its weights never change
    trial = trial_factory(train_mlp(steps=5, freeze_fc1=True))
    summary = invoke_rule(UnchangedTensor(trial, tensor_regex="weights/fc1.weight"))
    assert summary.first_step == 2  # the third saved step: num_steps=3 equal values
    assert summary.fired[0].values["steps"] == [0, 1, 2]


def test_unchanged_tensor_quiet_when_weights_train(trial_factory):
    trial = trial_factory(train_mlp(steps=5, lr=0.01))
    assert invoke_rule(UnchangedTensor(trial, collection_names="weights")).fired == []

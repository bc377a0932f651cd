"""The rules for today's training failures (issue 30) in the serverless evaluator on moto: each fires on
its failure as the steps arrive one notification at a time (loading only the history each rule says it
reads), names the same step and finding as ``invoke_rule`` over the whole trial, and stays quiet on the
healthy twin."""

from __future__ import annotations

import math

import numpy as np
import pytest
from evaluator_stack import Stack
from rule_runs import assert_all_quiet, assert_each_fires_as_offline, run_in_evaluator

# moto as the local mode runs it: the rule runs are long, and their claim is the verdicts (conftest)
pytestmark = pytest.mark.usefixtures("moto_as_local_mode")

STEPS = 36
ONSET = 26

RULES = [
    {"RuleConfigurationName": "LossSpike", "RuleParameters": {"window": "32", "min_window": "16"}},
    {"RuleConfigurationName": "GradientNormSpike", "RuleParameters": {"window": "16"}},
    {"RuleConfigurationName": "LearningRateDiscontinuity", "RuleParameters": {}},
    {"RuleConfigurationName": "LossScaleCollapse", "RuleParameters": {"skip_window": "8"}},
    {"RuleConfigurationName": "NonFiniteOrigin", "RuleParameters": {}},
    # a 36-step job: the expert starved from ONSET for 5 saved steps (the default window is 50)
    {"RuleConfigurationName": "ExpertImbalance", "RuleParameters": {"num_steps": "5"}},
    {"RuleConfigurationName": "AttentionEntropyCollapse", "RuleParameters": {}},
]


def _tensors(step: int, broken: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(step)
    bad = broken and step >= ONSET
    loss = 3.0 + 2.0 * math.exp(-step / 8) + 0.02 * rng.standard_normal()
    lr = 1e-3 * min(1.0, (step + 1) / 8) * (0.5 * (1 + math.cos(math.pi * step / 60)))
    load = np.full(4, 0.25) + rng.normal(0, 0.02, 4)
    entropy = 0.7 + 0.02 * rng.standard_normal()
    grad = rng.standard_normal(8) * 0.1
    scale = 2.0**16
    if bad:
        loss *= 5 if step == ONSET else 1  # a bad batch
        grad = grad * (40 if step == ONSET else 1)
        lr = 1e-3 * min(1.0, (step - ONSET + 1) / 8)  # resumed without the scheduler: warmup starts over
        scale = 2.0 ** max(16 - (step - ONSET + 1), 0)  # halved at every step: overflow after overflow
        load[1] = 0.0  # expert 1 receives nothing
        entropy = 0.01
    out = {
        "loss": np.float32(loss),
        "gradients/fc.weight": grad.astype(np.float32),
        "scalar/lr/0": np.float32(lr),
        "scalar/loss_scale": np.float32(scale),
        "router/layers.0.moe/expert_load": (load / load.sum()).astype(np.float32),
        "scalar/attention_entropy/layers.0.attn": np.float32(entropy),
        "block0_output_0": np.ones(4, dtype=np.float32),
        "block1_output_0": np.ones(4, dtype=np.float32),
    }
    if broken and step == ONSET + 2:
        out["block1_output_0"] = np.array([1, np.nan, 1, 1], dtype=np.float32)  # NaN from block1 only
    return out


def _run(stack: Stack, broken: bool) -> dict[str, tuple[str, str]]:
    return run_in_evaluator(stack, RULES, STEPS, lambda step: _tensors(step, broken))


def test_each_new_rule_fires_at_its_failure_in_the_evaluator_as_offline(stack: Stack) -> None:
    got = _run(stack, broken=True)
    expected_step = {
        "LossSpike": ONSET,
        "GradientNormSpike": ONSET,
        "LearningRateDiscontinuity": ONSET + 1,  # the drop is a restart once the rate climbs again
        "NonFiniteOrigin": ONSET + 2,
    }
    assert_each_fires_as_offline(got, RULES, expected_step)
    assert "block1" in got["NonFiniteOrigin"][1]
    assert "expert 1 of 4" in got["ExpertImbalance"][1]
    assert "layers.0.attn" in got["AttentionEntropyCollapse"][1]


def test_the_healthy_twin_is_quiet_in_the_evaluator(stack: Stack) -> None:
    assert_all_quiet(_run(stack, broken=False), RULES)

"""DataReplay and AttentionLogitGrowth in the serverless evaluator on moto: each fires at its failure as the
steps arrive one notification at a time (loading only the history each rule says it reads), at the step
``invoke_rule`` names over the whole trial, and stays quiet on the healthy twin (a second epoch that repeats
the first's order, logits that stay under the cap)."""

from __future__ import annotations

import numpy as np
import pytest
from evaluator_stack import Stack
from rule_runs import assert_all_quiet, assert_each_fires_as_offline, run_in_evaluator

from tornasole.core.batch_fingerprint import fingerprint_record

# moto as the local mode runs it: the rule runs are long, and their claim is the verdicts (conftest)
pytestmark = pytest.mark.usefixtures("moto_as_local_mode")

STEPS = 30
EPOCH = 12
RESUME = 20  # resumed here from the checkpoint of step 16, the loader not restored: 16.. again

RULES = [
    {"RuleConfigurationName": "DataReplay", "RuleParameters": {"window": "32"}},
    {"RuleConfigurationName": "AttentionLogitGrowth", "RuleParameters": {}},
]


def _tensors(step: int, broken: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    data = rng.integers(0, 64, size=(EPOCH, 4, 8))
    position, epoch = step % EPOCH, step // EPOCH  # no shuffling: epoch 1 repeats epoch 0's order
    if broken and step >= RESUME:
        position = (16 + step - RESUME) % EPOCH
    logit = 6.0 + 0.05 * step
    if broken and step >= RESUME:
        logit = 6.0 * 1.6 ** (step - RESUME + 1)
    return {
        "batch_fingerprint/input": fingerprint_record(data[position], epoch),
        "scalar/attention_logit_max/blocks.0.attn": np.float32(logit),
        "loss": np.float32(2.0),
    }


def _run(stack: Stack, broken: bool) -> dict[str, tuple[str, str]]:
    return run_in_evaluator(stack, RULES, STEPS, lambda step: _tensors(step, broken))


def test_replay_and_logit_growth_fire_in_the_evaluator_as_offline(stack: Stack) -> None:
    got = _run(stack, broken=True)
    assert_each_fires_as_offline(got, RULES, {"DataReplay": RESUME + 2})
    assert "trained on the batches of steps 16..18 (epoch 1)" in got["DataReplay"][1]
    assert "blocks.0.attn" in got["AttentionLogitGrowth"][1]


def test_the_healthy_twin_is_quiet_in_the_evaluator(stack: Stack) -> None:
    assert_all_quiet(_run(stack, broken=False), RULES)

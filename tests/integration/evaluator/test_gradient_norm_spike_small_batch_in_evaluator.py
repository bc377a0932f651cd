"""GradientNormSpike with the recommended ``min_batch_fraction`` in the serverless evaluator on moto (issue
29): the epoch's last batch of 2 samples (4 in the others), whose gradient norm is 70x its window's largest,
stays quiet as the steps arrive one notification at a time; a full batch's spike after it, judged against
a window without the small batch, fires at the step ``invoke_rule`` names over the whole trial."""

from __future__ import annotations

import numpy as np
from evaluator_stack import TRIAL, Stack
from rule_runs import assert_all_quiet, assert_each_fires_as_offline, run_in_evaluator

from tornasole.rules import create_rule, invoke_rule
from tornasole.rules.builtin.recommended import recommended_rules
from tornasole.trials import create_trial

RULES = [c for c in recommended_rules() if c["RuleConfigurationName"] == "GradientNormSpike"]
EPOCH = 12  # batches an epoch; the last holds 2 samples
STEPS = 2 * EPOCH
COLLECTIONS = {
    "gradients": {"name": "gradients", "include_regex": ["^gradients/"]},
    "model_input": {"name": "model_input", "include_regex": ["^Mlp_input_0$"]},
}


def _run(stack: Stack, spikes: dict[int, float]) -> dict[str, tuple[str, str]]:
    def tensors(step: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(step)
        g = rng.standard_normal(32)
        scale = float(np.exp(0.3 * rng.standard_normal())) * spikes.get(step, 1.0)
        batch = 2 if step % EPOCH == EPOCH - 1 else 4
        return {
            "gradients/fc.weight": (g / np.linalg.norm(g) * scale).astype(np.float32),
            "Mlp_input_0": rng.standard_normal((batch, 13)).astype(np.float32),
        }

    return run_in_evaluator(stack, RULES, STEPS, tensors, collections=COLLECTIONS)


def test_the_last_small_batch_is_quiet_in_the_evaluator(stack: Stack) -> None:
    got = _run(stack, {EPOCH - 1: 70.0})
    assert_all_quiet(got, RULES)
    assert not got["GradientNormSpike"][1].startswith("NothingEvaluated"), got
    # the trap is real: without min_batch_fraction the recommended reference fires at the small batch
    offline = invoke_rule(create_rule("GradientNormSpike", create_trial(TRIAL), reference="max"))
    assert offline.first_step == EPOCH - 1


def test_a_full_batch_spike_after_it_fires_in_the_evaluator_as_offline(stack: Stack) -> None:
    got = _run(stack, {EPOCH - 1: 70.0, EPOCH + 4: 40.0})
    assert_each_fires_as_offline(got, RULES, {"GradientNormSpike": EPOCH + 4})

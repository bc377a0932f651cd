"""LossSpike and GradientNormSpike as the recommended set configures them, in the serverless evaluator on
moto: each fires on a language model's bad batch and gradient-norm spike as the steps arrive one
notification at a time (loading only the window it says it reads), at the step ``invoke_rule`` names over
the whole trial; both stay quiet on a small-batch run whose one misclassified sample and noisy gradient
norm alarm the published criteria alone; and on a Keras trial LossSpike judges the batch's own loss
(``batch_loss/<Kind>``) in the evaluator as offline, not the logs' running mean."""

from __future__ import annotations

import numpy as np
import pytest
from evaluator_stack import TRIAL, Stack
from rule_runs import assert_all_quiet, assert_each_fires_as_offline, run_in_evaluator

from tornasole.rules import create_rule, invoke_rule, recommended_rules
from tornasole.trials import create_trial

# moto as the local mode runs it: the rule runs are long, and their claim is the verdicts (conftest)
pytestmark = pytest.mark.usefixtures("moto_as_local_mode")

STEPS = 48
ONSET = 40
RULES = [c for c in recommended_rules() if c["RuleConfigurationName"] in ("LossSpike", "GradientNormSpike")]


def _language_model(step: int) -> dict[str, np.ndarray]:
    """A plateau at 0.8 (a batch of many tokens); at ONSET a batch of random tokens and its gradient."""
    rng = np.random.default_rng(step)
    loss = 0.8 + 0.05 * rng.standard_normal()
    grad = rng.standard_normal(16) * 0.1
    if step == ONSET:
        loss, grad = 5.5, grad * 1000
    return {"loss": np.float32(loss), "gradients/fc.weight": grad.astype(np.float32)}


def _small_batch_losses() -> np.ndarray:
    """Batch 1: losses near 0 with a skewed tail; at ONSET one sample 6.3 sigma above its window."""
    losses = np.random.default_rng(7).exponential(0.2, STEPS)
    window = losses[:ONSET]
    losses[ONSET] = window.mean() + 6.3 * window.std()
    return losses


def _small_batch(step: int, losses: np.ndarray) -> dict[str, np.ndarray]:
    """Batches of 4: the gradient norm moves by a log-normal factor; at ONSET 14x the median."""
    rng = np.random.default_rng(100 + step)
    scale = 14.0 if step == ONSET else float(np.exp(0.8 * rng.standard_normal()))
    g = rng.standard_normal(16)
    return {
        "loss": np.float32(losses[step]),
        "gradients/fc.weight": (g / np.linalg.norm(g) * scale).astype(np.float32),
    }


def test_both_fire_on_the_language_model_failures_in_the_evaluator_as_offline(stack: Stack) -> None:
    assert {c["RuleConfigurationName"] for c in RULES} == {"LossSpike", "GradientNormSpike"}
    got = run_in_evaluator(stack, RULES, STEPS, _language_model)
    assert_each_fires_as_offline(got, RULES, {"LossSpike": ONSET, "GradientNormSpike": ONSET})


def test_both_stay_quiet_on_small_batch_noise_in_the_evaluator(stack: Stack) -> None:
    losses = _small_batch_losses()
    got = run_in_evaluator(stack, RULES, STEPS, lambda step: _small_batch(step, losses))
    assert_all_quiet(got, RULES)
    # the trap is real: the published criteria alone (their defaults) alarm on this run at ONSET
    for name in ("LossSpike", "GradientNormSpike"):
        offline = invoke_rule(create_rule(name, create_trial(TRIAL)))
        assert offline.first_step == ONSET, (name, offline.first_step)


def _keras(step: int, batch: np.ndarray) -> dict[str, np.ndarray]:
    """The Keras hook's names: ``loss`` the running mean over one epoch of STEPS batches, and the batch's
    own loss."""
    return {
        "loss": np.float32(batch[: step + 1].mean()),
        "batch_loss/SparseCategoricalCrossentropy_from_logits": np.float32(batch[step]),
    }


def test_loss_spike_judges_a_keras_batch_loss_in_the_evaluator_as_offline(stack: Stack) -> None:
    batch = np.random.default_rng(3).exponential(0.004, STEPS)
    batch[ONSET] = 1.4  # a bad batch, back to chance (ln 4)
    (rule,) = [c for c in RULES if c["RuleConfigurationName"] == "LossSpike"]
    got = run_in_evaluator(
        stack,
        [rule],
        STEPS,
        lambda step: _keras(step, batch),
        collections={
            "losses": {"name": "losses", "include_regex": ["(^|_)loss$"]},
            "loss_inputs": {"name": "loss_inputs", "include_regex": ["^batch_loss/"]},
        },
    )
    assert_each_fires_as_offline(got, [rule], {"LossSpike": ONSET})
    assert "batch_loss/SparseCategoricalCrossentropy_from_logits = 1.4" in got["LossSpike"][1]

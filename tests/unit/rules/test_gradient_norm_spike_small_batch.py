"""GradientNormSpike's ``min_batch_fraction`` (issue 29): the epoch's last batch of a data set the batch
size does not divide (``drop_last=False``) holds a few samples, and under BatchNorm its gradient norm is a
property of its size; read from the model input's saved shape, such a step is not judged and stays out of
later windows. A spike on a full batch still fires; a run that saves no model input is judged as before."""

from __future__ import annotations

import numpy as np
import pytest

from tornasole.exceptions import RuleParameterError
from tornasole.rules import create_rule, invoke_rule, recommended_rules

#: wine's shape (bench/detection): 35 batches an epoch, the 35th of 2 samples where the others hold 4
EPOCH = 35
LAST = EPOCH - 1


def _params() -> dict[str, str]:
    (conf,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == "GradientNormSpike"]
    return {k: v for k, v in conf["RuleParameters"].items() if k != "rule_to_invoke"}


def _run(n: int, spikes: dict[int, float], last_batch: int = 2, save_input: bool = True, seed: int = 0):
    """Gradients of norm about 1 (log-normal, sigma 0.3); the norm at step s x ``spikes[s]``; the model's
    input (``Mlp_input_0``, 13 features) of 4 samples a step, ``last_batch`` at each epoch's last."""
    rng = np.random.default_rng(seed)
    steps = {}
    for s in range(n):
        g = rng.standard_normal(32)
        scale = float(np.exp(0.3 * rng.standard_normal())) * spikes.get(s, 1.0)
        tensors = {"gradients/fc.weight": (g / np.linalg.norm(g) * scale).astype(np.float32)}
        if save_input:
            batch = last_batch if s % EPOCH == LAST else 4
            tensors["Mlp_input_0"] = rng.standard_normal((batch, 13)).astype(np.float32)
        steps[s] = tensors
    return steps


def test_a_last_batch_of_two_is_not_judged(trial_factory):
    # the epoch's last batch of 2 at 70x (wine noisy_small_batch s1 reached 71x the window's largest)
    trial = trial_factory(_run(3 * EPOCH, {LAST: 70.0, LAST + EPOCH: 30.0}))
    # the published criterion (Megatron's factor over the window's largest) fires at the first one
    assert invoke_rule(create_rule("GradientNormSpike", trial, reference="max")).first_step == LAST
    # the recommended set does not judge it (failed before: no min_batch_fraction)
    assert invoke_rule(create_rule("GradientNormSpike", trial, **_params())).fired == []


def test_a_spike_on_a_full_batch_still_fires_at_its_step(trial_factory):
    # the small batch's 70x norm stays out of the window: a later full-batch spike of 40x is judged against
    # the full batches' largest norm and fires at its own step
    trial = trial_factory(_run(3 * EPOCH, {LAST: 70.0, 50: 40.0}))
    fired = invoke_rule(create_rule("GradientNormSpike", trial, **_params())).fired
    assert fired[0].step == 50
    assert "max of its previous" in fired[0].details


def test_a_batch_above_the_fraction_is_judged(trial_factory):
    # a last batch of 3 of 4 (above half): judged as any other step
    trial = trial_factory(_run(2 * EPOCH, {LAST: 70.0}, last_batch=3))
    assert invoke_rule(create_rule("GradientNormSpike", trial, **_params())).first_step == LAST


def test_without_a_saved_model_input_the_published_criterion_judges(trial_factory):
    trial = trial_factory(_run(2 * EPOCH, {LAST: 70.0}, save_input=False))
    assert invoke_rule(create_rule("GradientNormSpike", trial, **_params())).first_step == LAST


@pytest.mark.parametrize("value", ["-0.1", "1"])
def test_min_batch_fraction_must_be_a_fraction(trial_factory, value):
    trial = trial_factory(_run(2, {}))
    with pytest.raises(RuleParameterError, match="min_batch_fraction"):
        create_rule("GradientNormSpike", trial, min_batch_fraction=value)

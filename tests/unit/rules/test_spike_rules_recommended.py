"""LossSpike and GradientNormSpike as the recommended set configures them: each still fires on the
language-model failure it was made for (a bad batch on a plateau, a one-step gradient-norm spike) and stays
quiet on the healthy patterns of small models where the published criteria alone alarm (one-sample losses
near 0 with a misclassified sample; gradient norms of batches of 4 moving by 10x)."""

from __future__ import annotations

import numpy as np
import pytest

from tornasole.exceptions import RuleParameterError
from tornasole.rules import create_rule, recommended_rules


def first_firing(rule, steps) -> int | None:
    for s in steps:
        if rule.evaluate(s).fired:
            return s
    return None


def recommended_params(name: str) -> dict[str, str]:
    (config,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == name]
    params = dict(config["RuleParameters"])
    assert params.pop("rule_to_invoke") == name
    return params


def plateau_loss(n: int, seed: int = 0) -> list[float]:
    """A language model's loss on its plateau: about 0.8 with the spread of a batch of many tokens."""
    rng = np.random.default_rng(seed)
    return list(0.8 + 0.05 * rng.standard_normal(n))


def one_sample_losses(n: int, seed: int = 0) -> list[float]:
    """Batch 1: most samples classified with confidence (loss near 0), a few far above: a skewed window."""
    rng = np.random.default_rng(seed)
    return list(rng.exponential(0.2, n))


# -- LossSpike -------------------------------------------------------------------------------------------
def test_loss_spike_recommended_fires_on_a_bad_batch_on_the_plateau(trial_factory):
    losses = plateau_loss(200)
    losses[160] = 5.5  # a batch of random tokens: back to chance level
    trial = trial_factory({s: {"loss": np.float32(v)} for s, v in enumerate(losses)})
    rule = create_rule("LossSpike", trial, **recommended_params("LossSpike"))
    assert first_firing(rule, range(200)) == 160
    out = rule.evaluate(160)
    assert out.values["criterion"] == "z_score"
    assert "largest rise" in out.details


def _skewed_with_a_six_sigma_sample(seed: int) -> tuple[list[float], int]:
    """One-sample losses where one misclassified sample sits just over 6 sigma above its window."""
    losses = one_sample_losses(200, seed)
    at = 170
    window = np.array(losses[at - 128 : at])
    losses[at] = float(window.mean() + 6.3 * window.std())
    return losses, at


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_loss_spike_recommended_quiet_on_one_sample_losses_near_0(trial_factory, seed):
    losses, at = _skewed_with_a_six_sigma_sample(seed)
    trial = trial_factory({s: {"loss": np.float32(v)} for s, v in enumerate(losses)})
    # the published z-score alone alarms on this healthy pattern ...
    assert first_firing(create_rule("LossSpike", trial), range(at + 1)) is not None
    # ... the recommended configuration does not: the sample is not far out of the window's own range
    assert (
        first_firing(create_rule("LossSpike", trial, **recommended_params("LossSpike")), range(200)) is None
    )


def test_loss_spike_rise_factor_judges_against_the_window_largest_rise(trial_factory):
    losses = plateau_loss(60)
    losses[40] = 1.6  # an earlier bump: rise 0.8 above the plateau
    losses[59] = 3.0  # rise 2.2: 2.75x the bump's
    trial = trial_factory({s: {"loss": np.float32(v)} for s, v in enumerate(losses)})
    fires = {f: create_rule("LossSpike", trial, rise_factor=f).evaluate(59).fired for f in ("0", "2", "4")}
    assert fires == {"0": True, "2": True, "4": False}


def test_loss_spike_rise_factor_is_checked(trial_factory):
    trial = trial_factory({0: {"loss": np.float32(1)}})
    with pytest.raises(RuleParameterError, match="LossSpike.*rise_factor.*must be >= 0"):
        create_rule("LossSpike", trial, rise_factor="-1")


# -- GradientNormSpike -----------------------------------------------------------------------------------
def small_batch_grads(n: int, seed: int = 0) -> dict[int, dict[str, np.ndarray]]:
    """Gradients of batches of 4: the total norm moves by a log-normal factor (sigma 0.8) step to step,
    and at step ``n - 10`` one batch's norm is 14x the median, about twice the largest of its window."""
    rng = np.random.default_rng(seed)
    scales = np.exp(0.8 * rng.standard_normal(n))
    scales[n - 10] = 14.0
    steps = {}
    for s in range(n):
        g = rng.standard_normal(32)
        steps[s] = {"gradients/fc.weight": (g / np.linalg.norm(g) * scales[s]).astype(np.float32)}
    return steps


def test_gradient_norm_spike_recommended_fires_on_a_one_step_spike(trial_factory):
    rng = np.random.default_rng(5)
    norms = list(1.0 + 0.1 * rng.standard_normal(200))
    norms[150] = 1000.0  # the loss of one step x1000, no clipping
    trial = trial_factory({s: {"scalar/grad_norm/total": np.float32(v)} for s, v in enumerate(norms)})
    rule = create_rule("GradientNormSpike", trial, **recommended_params("GradientNormSpike"))
    assert first_firing(rule, range(200)) == 150
    assert "max of its previous 128 saved values" in rule.evaluate(150).details


@pytest.mark.parametrize("seed", [0, 1])
def test_gradient_norm_spike_recommended_quiet_on_small_batch_noise(trial_factory, seed):
    n = 200
    trial = trial_factory(small_batch_grads(n, seed))
    # Megatron's factor over the window's median alarms on this healthy pattern ...
    assert first_firing(create_rule("GradientNormSpike", trial), range(n)) is not None
    # ... over the window's largest norm it does not
    params = recommended_params("GradientNormSpike")
    assert first_firing(create_rule("GradientNormSpike", trial, **params), range(n)) is None

"""Rules on patterns that are normal in some model family (bench/detection/families): each test fails on the
rule as it was before the change it covers."""

from __future__ import annotations

import numpy as np

from tornasole.rules import invoke_rule, recommended_rules
from tornasole.rules.generic import VanishingGradient


def _bn_fed_bias_steps(weight_grad: float) -> dict[int, dict[str, np.ndarray]]:
    """A conv layer with a bias feeding a BatchNorm: its bias gradient ~1e-9, its weight gradient given."""
    rng = np.random.default_rng(0)
    return {
        s: {
            "gradients/conv1.weight": rng.normal(scale=weight_grad, size=(8, 9)).astype(np.float32),
            "gradients/conv1.bias": rng.normal(scale=1e-9, size=8).astype(np.float32),
            "gradients/out.weight": rng.normal(scale=1e-2, size=(3, 8)).astype(np.float32),
            "gradients/out.bias": rng.normal(scale=1e-2, size=3).astype(np.float32),
        }
        for s in range(3)
    }


def test_vanishing_gradient_passes_over_a_bias_feeding_batchnorm(trial_factory):
    trial = trial_factory(_bn_fed_bias_steps(weight_grad=1e-2))
    assert invoke_rule(VanishingGradient(trial)).fired  # SageMaker's reading: every tensor alone
    assert not invoke_rule(VanishingGradient(trial, bias_by_layer="True")).fired


def test_vanishing_gradient_bias_by_layer_still_fires_when_the_layer_vanishes(trial_factory):
    trial = trial_factory(_bn_fed_bias_steps(weight_grad=1e-9))
    summary = invoke_rule(VanishingGradient(trial, bias_by_layer="True"))
    assert summary.fired
    assert summary.fired[0].values["tensor"] == "gradients/conv1.bias"


def test_recommended_vanishing_gradient_judges_biases_with_their_layer():
    (config,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == "VanishingGradient"]
    assert config["RuleParameters"]["bias_by_layer"] == "True"

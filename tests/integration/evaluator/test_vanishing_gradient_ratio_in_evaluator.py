"""The recommended VanishingGradient configuration in the serverless evaluator on moto: AUTOTRAINER's
first/last gradient-norm ratio at the set's 2e-3, asked to hold at two consecutive saved steps in a network
with a normalisation layer (a deep sigmoid stack behind LayerNorms), fires as the steps arrive one
notification at a time at the step ``invoke_rule`` names over the whole trial, and stays quiet on the twin
whose first layer gets a gradient of the output layer's size."""

from __future__ import annotations

import numpy as np
from evaluator_stack import Stack
from rule_runs import assert_each_fires_as_offline, run_in_evaluator

from tornasole.rules import recommended_rules

STEPS = 6


def _recommended_vanishing_gradient() -> dict:
    (conf,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == "VanishingGradient"]
    return {
        "RuleConfigurationName": conf["RuleConfigurationName"],
        "RuleParameters": dict(conf["RuleParameters"]),
    }


def _run(stack: Stack, first_norm: float, from_step: int = 0) -> dict[str, tuple[str, str]]:
    """Training steps of a first layer whose weight gradient has L2 norm ``first_norm`` at step 1 (alone) and
    from ``from_step`` on (0.4 at the others), a LayerNorm's scale gradient (a 1-D gradient not named bias)
    and an output layer whose gradient has norm 0.8; a loss that barely moves (the loss gate stays open)."""
    rng = np.random.default_rng(5)

    def scaled(shape: tuple[int, ...], norm: float) -> np.ndarray:
        g = rng.normal(size=shape)
        return (g * norm / np.linalg.norm(g)).astype(np.float32)

    def tensors(step: int) -> dict[str, np.ndarray]:
        return {
            "gradients/fc1.weight": scaled((16, 13), first_norm if step == 1 or step >= from_step else 0.4),
            "gradients/fc1_norm.weight": scaled((16,), 0.05),
            "gradients/out.weight": scaled((3, 16), 0.8),
            "loss": np.float32(1.10 - 0.005 * step),
        }

    return run_in_evaluator(stack, [_recommended_vanishing_gradient()], STEPS, tensors)


def test_a_ratio_of_one_in_eight_hundred_fires_in_the_evaluator_as_offline(stack: Stack) -> None:
    rule = _recommended_vanishing_gradient()
    # ratio 1.25e-3, first norm 1e-3 (AUTOTRAINER's 1e-4 never holds) at step 1 alone, then from step 3: the
    # network has a LayerNorm, so the check must hold at two consecutive saved steps, 3 and 4
    got = _run(stack, first_norm=1e-3, from_step=3)
    assert_each_fires_as_offline(got, [rule], {"VanishingGradient": 4})
    assert "norm_ratio_threshold 0.002" in got["VanishingGradient"][1]


def test_a_first_layer_gradient_of_the_output_layers_size_is_quiet(stack: Stack) -> None:
    status, details = _run(stack, first_norm=0.4)["VanishingGradient"]
    assert status == "NoIssuesFound", details

"""InitialLossTooHigh's two tiers in the serverless evaluator on moto, with the recommended parameters: a
first loss between ``factor`` and ``any_init_factor`` x chance fires when the weights the run saved at that
step are beyond any standard initialisation (as ``invoke_rule`` finds over the whole trial) and stays quiet
at a Glorot/He scale; above ``any_init_factor`` it fires with no weights saved."""

from __future__ import annotations

import math

import numpy as np
import pytest
from evaluator_stack import Stack
from rule_runs import assert_each_fires_as_offline, run_in_evaluator

from tornasole.rules import recommended_rules

COLLECTIONS = {
    "losses": {"name": "losses", "include_regex": ["(^|_)loss$"]},
    "loss_inputs": {"name": "loss_inputs", "include_regex": ["^(predictions|labels)$|^batch_loss/"]},
    "weights": {"name": "weights", "include_regex": ["^weights/"]},
}
LOSS = "batch_loss/SparseCategoricalCrossentropy"


def _rule() -> dict:
    (conf,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == "InitialLossTooHigh"]
    return conf


def _kernel(fan_in: int, fan_out: int, scale: float, seed: int) -> np.ndarray:
    """A Keras kernel ``(in, out)`` whose std x sqrt(fan-in) is ``scale``."""
    w = np.random.default_rng(seed).standard_normal((fan_in, fan_out))
    return (w / w.std() * scale / math.sqrt(fan_in)).astype(np.float32)


def _run(stack: Stack, first_ratio: float, scale: float | None) -> tuple[str, str]:
    rng = np.random.default_rng(3)

    def tensors(step: int) -> dict[str, np.ndarray]:
        value = np.float32(first_ratio * math.log(5) if step == 0 else 1.0)
        out = {
            "loss": np.array([value], np.float32),
            LOSS: np.array([value], np.float32),
            "predictions": rng.dirichlet(np.ones(5), size=16).astype(np.float32),
            "labels": rng.integers(0, 5, size=16),
        }
        if scale is not None:
            out.update({f"weights/net/fc{i}/kernel": _kernel(32, 32, scale, i) for i in range(3)})
            out["weights/net/fc0/bias"] = np.zeros(32, np.float32)
        return out

    return run_in_evaluator(stack, [_rule()], 6, tensors, collections=COLLECTIONS)["InitialLossTooHigh"]


def test_a_start_with_weights_beyond_any_initialisation_fires_as_offline(stack: Stack) -> None:
    got = {"InitialLossTooHigh": _run(stack, 3.0, scale=4.6)}  # DeepFD's x8 of PyTorch's default
    assert_each_fires_as_offline(got, [_rule()], {"InitialLossTooHigh": 0})
    assert "weights beyond any standard initialisation" in got["InitialLossTooHigh"][1]


@pytest.mark.parametrize("scale", [1.41, None])
def test_a_glorot_or_he_start_or_one_with_no_weights_is_quiet(stack: Stack, scale) -> None:
    status, details = _run(stack, 3.0, scale=scale)  # 3x chance: He on every layer reaches 5x
    assert status == "NoIssuesFound", details
    assert not details.startswith("NothingEvaluated"), details


def test_far_above_chance_fires_whatever_the_weights(stack: Stack) -> None:
    got = {"InitialLossTooHigh": _run(stack, 9.0, scale=1.41)}
    assert_each_fires_as_offline(got, [_rule()], {"InitialLossTooHigh": 0})
    assert "any_init_factor 8" in got["InitialLossTooHigh"][1]

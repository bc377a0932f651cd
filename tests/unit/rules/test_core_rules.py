"""VanishingGradient and ExplodingTensor on small synthetic trials, through invoke_rule and evaluate."""

from __future__ import annotations

import numpy as np

from tornasole.rules import invoke_rule
from tornasole.rules.generic import ExplodingTensor, VanishingGradient
from tornasole.rules.outcome import split_advice


def _grads(scale: float) -> dict[str, np.ndarray]:
    return {"gradients/fc1.weight": np.full((3, 2), scale, np.float32), "gradients/fc1.bias": np.ones(2)}


def test_vanishing_gradient_fires_first_at_the_step_where_a_layer_vanishes(trial_factory):
    trial = trial_factory({s: _grads(1e-9 if s >= 3 else 1e-2) for s in range(6)})
    summary = invoke_rule(VanishingGradient(trial, threshold="1e-7"))
    assert summary.first_step == 3
    assert summary.fired_steps == [3, 4, 5]
    assert summary.steps_evaluated == 6
    out = summary.fired[0]
    assert split_advice(out.details)[0] == (
        "VanishingGradient: condition met at step 3 (GLOBAL 3): "
        "mean(|gradients/fc1.weight|)=1e-09 < threshold 1e-07"
    )
    assert out.values["tensor"] == "gradients/fc1.weight"


def test_vanishing_gradient_does_not_fire_on_healthy_gradients(trial_factory):
    trial = trial_factory({s: _grads(1e-3) for s in range(4)})
    summary = invoke_rule(VanishingGradient(trial))
    assert summary.fired == []
    assert summary.status == "NoIssuesFound"


def test_evaluate_returns_outcome_without_raising(trial_factory):
    trial = trial_factory({0: _grads(0.0)})
    out = VanishingGradient(trial).evaluate(0)
    assert out.fired
    assert out.status == "IssuesFound"
    assert out.step == 0


def test_exploding_tensor_fires_on_nan_and_respects_only_nan(trial_factory):
    trial = trial_factory(
        {
            0: {"gradients/a": np.ones(3)},
            1: {"gradients/a": np.array([1, np.inf])},
            2: {"gradients/a": [np.nan]},
        }
    )
    assert invoke_rule(ExplodingTensor(trial)).first_step == 1
    assert invoke_rule(ExplodingTensor(trial, only_nan="true")).first_step == 2
    assert invoke_rule(ExplodingTensor(trial, collection_names="weights")).fired == []

"""Every firing explains itself: which tensor, which step and mode, the numbers compared, the threshold."""

from __future__ import annotations

import numpy as np
import pytest
from hook_trials import epochs

from tornasole.rules import create_rule, invoke_rule

BROKEN_CONFIGS = [
    ("VanishingGradient", {}),
    ("VanishingGradient", {"threshold": "0", "norm_ratio_threshold": "0.001"}),
    ("ExplodingTensor", {}),
    ("WeightUpdateRatio", {}),
    ("DeadRelu", {"min_samples": "8"}),
    ("SaturatedActivation", {}),
    (
        "SaturatedActivation",
        {"threshold_tanh_min": "-5", "threshold_tanh_max": "5", "fraction_saturated": "50"},
    ),
    ("LossNotDecreasing", {"num_steps": "2"}),
    ("LossNotDecreasing", {"mode": "TRAIN", "num_steps": "2", "window": "2", "reference": "first"}),
    ("Overfit", {}),
    ("Overtraining", {"patience_train": "2"}),
    ("OscillatingLoss", {"mode": "EVAL"}),
    ("PoorWeightInitialization", {"patience": "2"}),
    ("UnchangedTensor", {"collection_names": "weights"}),
    ("AllZero", {"collection_names": "gradients"}),
    ("TensorVariance", {"collection_names": "weights", "min_threshold": "0.001"}),
]


def _broken_trial(path):
    rng = np.random.default_rng(0)
    train = []
    for e in range(6):
        steps = []
        for i in range(4):
            k = 4 * e + i
            steps.append(
                {
                    "loss": np.float32(2.0 if k % 2 else 1.0),
                    "weights/fc1.weight": np.ones((4, 2), np.float32),
                    "gradients/fc1.weight": np.zeros((4, 2), np.float32) if k else np.full((4, 2), 1e-9),
                    "gradients/fc2.weight": rng.normal(size=(2, 4)),
                    "fc1_relu_output": np.zeros((4, 4), np.float32),
                    "fc1_relu_input": rng.normal(size=(4, 4)) * (100 if k % 2 else 1),
                    "fc1_tanh_input": np.full((4, 4), 12.0 * (1 if k % 3 else -1)),
                    "out": np.array([np.nan if k == 5 else 0.0]),
                }
            )
        train.append(steps)
    evals = [[{"loss": np.float32(5.0 if e % 2 else 1.0)}] * 2 for e in range(6)]
    return epochs(path, train, evals)


@pytest.fixture(scope="module")
def broken_trial(tmp_path_factory):
    return _broken_trial(str(tmp_path_factory.mktemp("explain") / "t"))


@pytest.mark.parametrize(
    ("rule", "params"), BROKEN_CONFIGS, ids=[f"{r}-{i}" for i, (r, _) in enumerate(BROKEN_CONFIGS)]
)
def test_every_firing_names_tensor_step_mode_numbers_and_threshold(broken_trial, rule, params):
    trial = broken_trial
    summary = invoke_rule(create_rule(rule, trial, **params))
    assert summary.fired, f"{rule} did not fire on the broken trial"
    for outcome in summary.fired:
        assert f"condition met at step {outcome.step} ({outcome.mode} {outcome.mode_step})" in outcome.details
        assert outcome.mode in ("TRAIN", "EVAL")
        assert "tensor" in outcome.values
        assert outcome.values["tensor"] in outcome.details
        assert "value" in outcome.values or "nan_count" in outcome.values or "steps" in outcome.values
        if rule not in ("ExplodingTensor", "UnchangedTensor"):  # NaN/Inf and "allclose" have no number
            assert "threshold" in outcome.values, outcome.values

"""InitialLossTooHigh on real Keras regressions (``batch_loss/MeanSquaredError`` against ``labels``): He
normal on every layer starts some seeds above 2x the targets' mean square and stays quiet (the kernels'
scale, read with Keras's fan-in on axis 0, is a standard one); DeepFD's x8 of Keras's default fires through
the weights the hook saved at step 0."""

from __future__ import annotations

import numpy as np

from tests.frameworks.conftest import fit_saving_loss_inputs, two_dense_model
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.initial_loss_too_high import InitialLossTooHigh

BATCH = 16


def _data(n: int = 64):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    y = (x @ rng.normal(size=(4, 1)) / 2 + 0.3 * rng.normal(size=(n, 1))).astype(np.float32)
    return x, (y - y.mean()) / y.std()


def _model(keras, init: str, seed: int, scale: float = 1.0):
    """4 -> 64 -> 1: a narrow input into a wide layer, where fan-in read on the wrong axis (64 for 4) would
    make a standard kernel look 4x too large."""
    return two_dense_model(keras, init=init, seed=seed, hidden=64, outputs=1, name="reg", scale=scale)


def _first_ratio(model) -> float:
    x, y = _data()
    out = np.asarray(model(x[:BATCH]))
    return float(np.mean((out - y[:BATCH]) ** 2) / np.mean(y[:BATCH] ** 2))


def _fit(keras, model, out):
    x, y = _data()
    return fit_saving_loss_inputs(keras, model, out, x, y, loss="mean_squared_error", lr=0.001, batch=BATCH)


def test_a_he_start_above_the_factor_stays_quiet(keras_tf, tmp_path):
    keras, _ = keras_tf
    seed = next(s for s in range(60) if _first_ratio(_model(keras, "he_normal", s)) > 2.5)
    trial = _fit(keras, _model(keras, "he_normal", seed), tmp_path / "he")
    assert "batch_loss/MeanSquaredError" in trial.tensor_names()
    # the old single factor's verdict, had it been set this low
    assert invoke_rule(InitialLossTooHigh(trial, squared_error_any_factor="2")).first_step == 0
    summary = invoke_rule(InitialLossTooHigh(trial))
    assert summary.fired == []
    assert summary.steps_evaluated > 0
    median, tensors = InitialLossTooHigh(trial).weights_scale(0)
    assert tensors == 2  # the two kernels; biases left out
    assert median < 2.0  # He's sqrt(2); fan-in read on axis 1 the first kernel would read 4x that


def test_eight_times_keras_default_fires_through_the_saved_weights(keras_tf, tmp_path):
    keras, _ = keras_tf
    model = _model(keras, "glorot_uniform", 0, scale=8.0)
    assert _first_ratio(model) > 2
    trial = _fit(keras, model, tmp_path / "x8")
    (first,) = invoke_rule(InitialLossTooHigh(trial)).fired
    assert first.step == 0
    assert "batch_loss/MeanSquaredError" in first.details
    assert "the mean square of the first batch's targets labels" in first.details
    assert "squared_error_factor 2, with weights beyond any standard initialisation" in first.details
    median, _ = InitialLossTooHigh(trial).weights_scale(0)
    assert median > 3

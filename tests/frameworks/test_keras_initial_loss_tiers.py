"""InitialLossTooHigh on real Keras runs: Keras's default (Glorot uniform) and He normal on every layer start
above 1.4x chance on some seeds and stay quiet (their weights' scale is a standard one); DeepFD's x8 of
the default start fires at factor 1.4 through the weights the hook saved at step 0."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.frameworks.conftest import fit_saving_loss_inputs, two_dense_model
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.initial_loss_too_high import InitialLossTooHigh

CLASSES = 3
BATCH = 16


def _data(n: int = 64):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    return x, np.argmax(x[:, :CLASSES], axis=1)


def _model(keras, init: str, seed: int, scale: float = 1.0):
    return two_dense_model(
        keras,
        init=init,
        seed=seed,
        hidden=16,
        outputs=CLASSES,
        output_activation="softmax",
        name="clf",
        scale=scale,
    )


def _first_ratio(keras, model) -> float:
    x, y = _data()
    loss = keras.losses.SparseCategoricalCrossentropy()(y[:BATCH], model(x[:BATCH]))
    return float(loss) / math.log(CLASSES)


def _fit(keras, model, out):
    x, y = _data()
    return fit_saving_loss_inputs(
        keras, model, out, x, y, loss="sparse_categorical_crossentropy", lr=0.01, batch=BATCH
    )


@pytest.mark.parametrize("init", ["glorot_uniform", "he_normal"])
def test_a_standard_keras_start_above_the_factor_stays_quiet(keras_tf, tmp_path, init):
    keras, _ = keras_tf
    seed = next(s for s in range(60) if 1.45 < _first_ratio(keras, _model(keras, init, s)) < 8)
    trial = _fit(keras, _model(keras, init, seed), tmp_path / init)
    assert invoke_rule(InitialLossTooHigh(trial, any_init_factor="1.4")).first_step == 0  # the old verdict
    summary = invoke_rule(InitialLossTooHigh(trial))
    assert summary.fired == []
    assert summary.steps_evaluated > 0
    median, tensors = InitialLossTooHigh(trial).weights_scale(0)
    assert tensors == 2  # the two kernels (Keras layout: fan-in the second-to-last axis); biases left out
    assert median < 2.0


def test_eight_times_keras_default_fires_through_the_saved_weights(keras_tf, tmp_path):
    keras, _ = keras_tf
    model = _model(keras, "glorot_uniform", 5, scale=8.0)
    assert 1.4 < _first_ratio(keras, model) < 8  # 2.1x: below any_init_factor (most x8 seeds start above)
    trial = _fit(keras, model, tmp_path / "x8")
    (first,) = invoke_rule(InitialLossTooHigh(trial)).fired
    assert first.step == 0
    assert first.values["threshold"] == pytest.approx(1.4 * math.log(CLASSES), rel=1e-6)
    assert "weights beyond any standard initialisation" in first.details
    assert "batch_loss/SparseCategoricalCrossentropy" in first.details
    median, _ = InitialLossTooHigh(trial).weights_scale(0)
    assert median > 3  # Glorot's sqrt(2 fan-in / (fan-in + fan-out)) x 8

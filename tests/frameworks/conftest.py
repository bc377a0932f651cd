"""Fixtures of the framework-hook tests: TensorFlow/Keras imported once per module, quietly.

TensorFlow's import takes seconds, so every Keras/TF test module shares one
module-scoped fixture and keeps models tiny (a few steps each).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


@pytest.fixture(scope="module")
def keras_tf():
    """``(keras, tensorflow)`` on the TensorFlow backend."""
    import keras
    import tensorflow as tf

    assert keras.backend.backend() == "tensorflow"
    return keras, tf


def tiny_model(keras, *, activation="relu", hidden=(3,), lr=0.1, optimizer="sgd", seed=0):
    """A compiled dense model on 4 inputs: hidden layers ``d1``, ``d2``... and output ``out``."""
    keras.utils.set_random_seed(seed)
    layers = [keras.Input((4,))]
    layers += [keras.layers.Dense(h, activation=activation, name=f"d{i + 1}") for i, h in enumerate(hidden)]
    layers.append(keras.layers.Dense(1, name="out"))
    model = keras.Sequential(layers, name="net")
    opt = keras.optimizers.SGD(lr) if optimizer == "sgd" else keras.optimizers.Adam(lr)
    model.compile(optimizer=opt, loss="mse", metrics=["mae"])
    return model


def regression_data(n=16, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 4), dtype=np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], dtype=np.float32)).astype(np.float32)
    return x, y

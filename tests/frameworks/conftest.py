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


def two_dense_model(keras, *, init, seed, hidden, outputs, output_activation=None, name, scale=1.0):
    """``Input(4) -> Dense(hidden, relu) "d1" -> Dense(outputs) "out"``, every kernel drawn by ``init``
    under ``seed``, then every kernel (not the biases) multiplied by ``scale`` (DeepFD's weight mutant)."""
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(hidden, activation="relu", kernel_initializer=init, name="d1"),
            keras.layers.Dense(outputs, activation=output_activation, kernel_initializer=init, name="out"),
        ],
        name=name,
    )
    for v in model.trainable_weights:
        if len(v.shape) == 2:
            v.assign(v.numpy() * scale)
    return model


def fit_saving_loss_inputs(keras, model, out, x, y, *, loss, lr, batch):
    """Compile ``model`` with SGD(``lr``) and ``loss``, fit one unshuffled epoch of ``(x, y)`` in batches
    of ``batch`` under a hook that saves every step's losses, weights, ``predictions``, ``labels`` and
    ``batch_loss/<Kind>``, and return the trial read from ``out``."""
    from tornasole.core.save_config import SaveConfig
    from tornasole.keras import Hook
    from tornasole.trials import create_trial

    model.compile(optimizer=keras.optimizers.SGD(lr), loss=loss)
    hook = Hook(
        str(out),
        save_config=SaveConfig(save_interval=1),
        include_collections=["losses", "loss_inputs", "weights"],
    )
    hook.get_collection("loss_inputs").include(r"^(predictions|labels)$|^batch_loss/")
    model.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False, callbacks=[hook])
    hook.close()
    return create_trial(str(out))

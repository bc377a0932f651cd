"""smdebug 1.0.34 reads the trees the Keras/TF hook writes, value for value as our reader does.

The trees are written here, with TensorFlow in our process; smdebug's venv only
reads files (it needs no TensorFlow). Reader answers are compared through the
shared dump of ``trial_dump`` (steps, modes, names, every value by step and by
mode step, reductions, shapes, collections).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from test_reader_differential import _compare
from trial_dump import dump_with_ours, dump_with_smdebug

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _write_keras_tree(out: Path) -> None:
    import keras
    import tensorflow as tf

    from tornasole.keras import Hook, ReductionConfig, SaveConfig

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(3, activation="relu", name="d1"),
            keras.layers.Dense(1, name="out"),
        ],
        name="net",
    )
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse", metrics=["mae"])
    rng = np.random.default_rng(0)
    x = rng.random((16, 4), dtype=np.float32)
    y = x.sum(axis=1, keepdims=True)
    hook = Hook(
        str(out),
        save_config=SaveConfig(save_interval=2),
        include_collections=["weights", "biases", "gradients", "optimizer_variables", "outputs"],
        include_regex=["^d1/", "^batch_loss/"],
        reduction_config=ReductionConfig(reductions=["mean"], abs_reductions=["max"], save_raw_tensor=True),
    )
    model.fit(
        x,
        y,
        batch_size=4,
        epochs=1,
        verbose=0,
        shuffle=False,
        validation_data=(x[:8], y[:8]),
        callbacks=[hook],
    )
    model.predict(x, batch_size=8, verbose=0, callbacks=[hook])
    # and a custom-loop step on the same hook (TRAIN again)
    with hook.wrap_tape(tf.GradientTape()) as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    tape.gradient(loss, model.trainable_weights)
    hook.save_scalar("lr", 0.01)
    hook.close()


def test_smdebug_reads_the_keras_tree_as_we_do(tmp_path: Path) -> None:
    root = tmp_path / "keras"
    _write_keras_tree(root)
    w = "weights/net/d1/kernel"
    inputs = {
        "path": str(root),
        "workers": ["worker_0"],
        "reductions": [[w, 0, "worker_0", "mean", False], [w, 0, "worker_0", "max", True]],
        "shapes": [],
    }
    theirs = dump_with_smdebug(inputs)
    ours = dump_with_ours(inputs)
    assert theirs.data["modes"] == ["EVAL", "PREDICT", "TRAIN"]
    assert "gradients/net/d1/kernelGrad" in theirs.data["tensor_names"]
    assert "d1/outputs" in theirs.data["tensor_names"]
    # smdebug's names for the model's outputs and targets, and the batch loss named after its kind
    assert {"predictions", "labels", "batch_loss/MeanSquaredError"} <= set(theirs.data["tensor_names"])
    assert len(theirs.arrays) > 50
    problems = _compare(ours, theirs, set())
    assert not problems, "\n".join(problems[:40])

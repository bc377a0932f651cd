"""The Keras hook on the PyTorch backend: a plain callback saving what a callback can read.

Gradients and layer inputs/outputs need the TensorFlow taps; on another backend
they are skipped with one warning, and the rest is saved as on TensorFlow. Run
in a fresh interpreter (the backend is chosen when Keras is first imported).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, os, sys, tempfile
import numpy as np, keras
from tornasole.keras import Hook, SaveConfig
from tornasole.modes import ModeKeys
from tornasole.trials import create_trial

out = sys.argv[1]
keras.utils.set_random_seed(0)
m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="d1"), keras.layers.Dense(1, name="out")],
                     name="net")
m.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", metrics=["mae"])
after = []

class Rec(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        after.append(keras.ops.convert_to_numpy(m.layers[0].kernel.value).copy())

hook = Hook(out, save_config=SaveConfig(save_interval=1), include_regex="^out/",
            include_collections=["weights", "biases", "gradients", "optimizer_variables"])
x = np.random.default_rng(0).random((8, 4), dtype=np.float32)
y = x.sum(axis=1, keepdims=True)
hist = m.fit(x, y, batch_size=4, verbose=0, validation_data=(x[:4], y[:4]), callbacks=[Rec(), hook])
m.evaluate(x, y, batch_size=4, verbose=0, callbacks=[hook])
hook.close()
t = create_trial(out)
print(json.dumps({
    "backend": keras.backend.backend(), "names": t.tensor_names(),
    "train": t.steps(mode=ModeKeys.TRAIN), "eval": t.steps(mode=ModeKeys.EVAL),
    "val_loss": [t.tensor("val_loss").value(0, mode=ModeKeys.EVAL).item(),
                 float(np.float32(hist.history["val_loss"][0]))],
    "weights_after_step": all(
        np.array_equal(t.tensor("weights/net/d1/kernel").value(s), after[s]) for s in (0, 1)
    ),
}))
"""


@pytest.mark.slow
def test_torch_backend_saves_weights_losses_metrics_optimizer_variables(tmp_path):
    env = {**os.environ, "KERAS_BACKEND": "torch", "TF_CPP_MIN_LOG_LEVEL": "3"}
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "trial")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    res = json.loads(run.stdout.strip().splitlines()[-1])
    assert res["backend"] == "torch"
    assert res["names"] == [
        "loss",
        "mae",
        "optimizer_variables/sgd/iteration",
        "optimizer_variables/sgd/learning_rate",
        "val_loss",
        "val_mae",
        "weights/net/d1/bias",
        "weights/net/d1/kernel",
        "weights/net/out/bias",
        "weights/net/out/kernel",
    ]
    assert res["train"] == [0, 1]
    # one validation batch (EVAL 0, its val_ logs too), then two of evaluate
    assert res["eval"] == [0, 1, 2]
    assert res["val_loss"][0] == res["val_loss"][1]
    assert res["weights_after_step"]
    assert "saved on the TensorFlow backend only" in run.stderr

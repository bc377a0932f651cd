"""Two real MultiWorkerMirroredStrategy processes (TF_CONFIG on loopback ports): each writes its own files.

A custom loop (``strategy.run`` of a wrapped-tape step): every worker saves its
own tape's gradients (local, before the all-reduce) and the mirrored weights,
which are the same on both workers. A custom loop because Keras 3.15's ``fit``
itself fails under this strategy with TensorFlow 2.21 and two workers, with or
without a hook (keras-team/keras#20585; docs/GUIDE.md, Troubleshooting, says where and why).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from tornasole.trials import create_trial

WORKER = r"""
import json, os, sys
import numpy as np
import tensorflow as tf
import keras
from tornasole.keras import Hook, SaveConfig

strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, name="d1")], name="net")
    opt = keras.optimizers.SGD(0.1)
hook = Hook(sys.argv[1], save_config=SaveConfig(save_interval=1), include_workers="all",
            include_collections=["weights", "gradients", "losses"])
rng = np.random.default_rng(json.loads(os.environ["TF_CONFIG"])["task"]["index"])
x = rng.random((8, 4), dtype=np.float32)
y = np.stack([x.sum(axis=1), x[:, 0]], axis=1)

def step(xb, yb):
    with hook.wrap_tape(tf.GradientTape()) as tape:
        loss = tf.reduce_mean(tf.square(model(xb) - yb))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))

for i in range(2):
    strategy.run(step, args=(x[4 * i : 4 * i + 4], y[4 * i : 4 * i + 4]))
hook.close()
print(json.dumps({"worker": hook.worker, "num_workers": hook.num_workers}))
"""


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.mark.slow
def test_two_multiworker_processes_write_their_own_files(tmp_path):
    out = tmp_path / "trial"
    cluster = {"worker": [f"127.0.0.1:{p}" for p in _free_ports(2)]}
    procs = []
    for index in (0, 1):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        env = {**os.environ, "TF_CONFIG": tf_config, "TF_CPP_MIN_LOG_LEVEL": "3"}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, str(out)],
                env=env,
                cwd=tmp_path,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-3000:]
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    assert results == [{"worker": "worker_0", "num_workers": 2}, {"worker": "worker_1", "num_workers": 2}]

    trial = create_trial(str(out))
    assert trial.workers() == ["worker_0", "worker_1"]
    assert trial.steps() == [0, 1]
    w, g = "weights/net/d1/kernel", "gradients/net/d1/kernelGrad"
    # mirrored weights agree; each worker's tape gradients are its own (different data)
    np.testing.assert_array_equal(
        trial.tensor(w).value(1, worker="worker_0"), trial.tensor(w).value(1, worker="worker_1")
    )
    assert not np.array_equal(
        trial.tensor(g).value(0, worker="worker_0"), trial.tensor(g).value(0, worker="worker_1")
    )

"""Worker identity for TensorFlow jobs (TF_CONFIG of MultiWorkerMirroredStrategy, Horovod variables).

Each worker writes its own files; here two hooks configured as two TF_CONFIG
tasks write one trial, and the reader sees both workers at every step.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from tornasole.core.save_config import SaveConfig
from tornasole.exceptions import ConfigurationError
from tornasole.keras.workers import detect_keras_worker, worker_from_tf_config
from tornasole.trials import create_trial


def _tf_config(kind, index, chief=0, workers=2, ps=0):
    cluster = {"worker": [f"127.0.0.1:{2000 + i}" for i in range(workers)]}
    if chief:
        cluster["chief"] = ["127.0.0.1:1999"]
    if ps:
        cluster["ps"] = ["127.0.0.1:3000"]
    return json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})


@pytest.mark.parametrize(
    ("raw", "rank", "size"),
    [
        (_tf_config("worker", 0), 0, 2),
        (_tf_config("worker", 1), 1, 2),
        (_tf_config("chief", 0, chief=1), 0, 3),
        (_tf_config("worker", 0, chief=1), 1, 3),
        (_tf_config("worker", 1, chief=1), 2, 3),
        (_tf_config("ps", 0, ps=1), 2, 2),
    ],
)
def test_rank_from_tf_config(raw, rank, size):
    info = worker_from_tf_config(raw)
    assert (info.rank, info.world_size, info.name) == (rank, size, f"worker_{rank}")


def test_horovod_variables_win_over_tf_config():
    env = {"TF_CONFIG": _tf_config("worker", 1), "HOROVOD_RANK": "3", "HOROVOD_SIZE": "4"}
    assert detect_keras_worker(env).name == "worker_3"
    assert detect_keras_worker({}).name == "worker_0"


@pytest.mark.parametrize("raw", ["{not json", _tf_config("worker", 5)])
def test_bad_tf_config_is_named(raw):
    with pytest.raises(ConfigurationError, match="TF_CONFIG"):
        worker_from_tf_config(raw)


def test_each_tf_config_worker_writes_its_own_files(keras_tf, tmp_path, monkeypatch):
    from tornasole.keras import Hook

    for index in (0, 1):
        monkeypatch.setenv("TF_CONFIG", _tf_config("worker", index))
        hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=1), include_workers="all")
        for step in range(2):
            hook.next_step()  # opens step 0, then 1 (as each `with hook.wrap_tape(...)` does)
            hook.save_tensor("w", np.full(2, 10 * index + step, dtype=np.float32))
        hook.close()
    assert sorted(p.name for p in (tmp_path / "index" / "000000000").iterdir()) == [
        f"{step:012d}_worker_{w}.json" for step in range(2) for w in range(2)
    ]
    trial = create_trial(str(tmp_path))
    assert trial.workers() == ["worker_0", "worker_1"]
    assert trial.num_workers == 2
    assert trial.tensor("w").value(1, worker="worker_1").tolist() == [11.0, 11.0]


def test_initialized_horovod_module_gives_the_rank(monkeypatch):
    import types

    hvd = types.SimpleNamespace(is_initialized=lambda: True, rank=lambda: 1, size=lambda: 3)
    monkeypatch.setitem(sys.modules, "horovod.tensorflow", hvd)
    info = detect_keras_worker({"TF_CONFIG": _tf_config("worker", 0)})
    assert (info.rank, info.world_size, info.source) == (1, 3, "horovod")

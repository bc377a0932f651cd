"""Two torch.distributed (gloo, CPU) processes write one two-worker trial that reads as complete steps."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

from tornasole.trials import create_trial

WORKER = Path(__file__).with_name("dist_worker.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_two_workers(out_dir: Path) -> None:
    """Start both ranks, wait for them, fail with their output if either fails."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(out_dir), str(rank), "2", str(port)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(2)
    ]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    for rank, (p, out) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0, f"rank {rank} failed:\n{out[-3000:]}"


def test_two_process_gloo_training_writes_a_complete_two_worker_trial(tmp_path: Path):
    run_two_workers(tmp_path)
    for w in ("worker_0", "worker_1"):
        doc = json.loads((tmp_path / f"collections/000000000/{w}_collections.json").read_text())
        assert doc["_meta"] == {"num_workers": 2}
    trial = create_trial(str(tmp_path))
    assert sorted(trial.workers()) == ["worker_0", "worker_1"]
    assert trial.steps() == [0, 4, 8]
    weight = trial.tensor("Sequential_0.weight")
    assert weight.steps() == [0, 4, 8]  # complete: both workers wrote every saved step
    for step in (0, 4, 8):
        # gradients are all-reduced, so both replicas hold the same weights
        np.testing.assert_array_equal(
            weight.value(step, worker="worker_0"), weight.value(step, worker="worker_1")
        )
    g0 = trial.tensor("gradient/Sequential_0.weight").value(4, worker="worker_0")
    g1 = trial.tensor("gradient/Sequential_0.weight").value(4, worker="worker_1")
    assert not np.array_equal(g0, g1)  # saved before the all-reduce: each worker's own gradient
    assert sorted(trial.tensor("MSELoss_output_0").workers(4)) == ["worker_0", "worker_1"]

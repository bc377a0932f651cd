"""The two-process torch.distributed script of ``tests/frameworks/smdebug_scripts/dist_train_smdebug.py``
(smdebug's API only) on smdebug 1.0.34 and on Tornasole through the alias: the same workers, steps, tensor
names, workers per step and values, read by our trial and by smdebug's."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from smdebug_runner import SMDEBUG_PYTHON, child_env, run_smdebug

from tornasole.trials import create_trial

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "frameworks" / "smdebug_scripts" / "dist_train_smdebug.py"

# smdebug reads both trees in one child (one smdebug start).
READ = """
from smdebug.trials import create_trial

def read(path):
    t = create_trial(path)
    return {"workers": sorted(t.workers()), "steps": t.steps(), "names": sorted(t.tensor_names()),
            "workers_at": {f"{n}|{s}": sorted(t.tensor(n).workers(s)) for n in t.tensor_names()
                           for s in t.tensor(n).steps()}}

emit([read(path) for path in INPUT["paths"]])
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_ranks(argv: list[str], out_dir: Path, include_workers: str, env: dict[str, str]) -> None:
    port = str(_free_port())
    procs = [
        subprocess.Popen(
            [*argv, str(SCRIPT), str(out_dir), str(rank), "2", port, include_workers],
            env=env,
            cwd=out_dir.parent,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(2)
    ]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    for rank, (p, out) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0, f"{argv[0]} rank {rank} failed:\n{out[-3000:]}"


@pytest.mark.parametrize("include_workers", ["all", "one"])
def test_same_distributed_trial_as_smdebug(tmp_path: Path, include_workers: str):
    ours, theirs = tmp_path / "ours", tmp_path / "smdebug"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = str(REPO / "layers")
    _run_ranks([sys.executable, "-m", "tornasole.compat.smdebug_alias"], ours, include_workers, env)
    _run_ranks([str(SMDEBUG_PYTHON)], theirs, include_workers, child_env())

    a, b = run_smdebug(READ, inputs={"paths": [str(ours), str(theirs)]}).data
    expected_workers = ["worker_0", "worker_1"] if include_workers == "all" else ["worker_0"]
    assert a["workers"] == b["workers"] == expected_workers
    assert a["steps"] == b["steps"] == [0, 1, 5]
    assert a["names"] == b["names"]
    assert a["workers_at"] == b["workers_at"]

    # our reader on both trees: the same workers per step and the same values
    mine, smd = create_trial(str(ours)), create_trial(str(theirs))
    assert sorted(mine.workers()) == sorted(smd.workers()) == expected_workers
    for name in a["names"]:
        for step in (0, 1, 5):
            assert sorted(mine.tensor(name).workers(step)) == sorted(smd.tensor(name).workers(step))
            for worker in expected_workers:
                np.testing.assert_allclose(
                    mine.tensor(name).value(step, worker=worker),
                    smd.tensor(name).value(step, worker=worker),
                    rtol=1e-6,
                    err_msg=f"{name} step {step} {worker}",
                )

"""A two-process torch.distributed (gloo, CPU) script written against smdebug's API, run unchanged on
Tornasole through the ``smdebug`` alias: ``include_workers="all"`` gives a two-worker trial whose every
saved step holds both workers, ``"one"`` only the chief's files. The same script on smdebug 1.0.34 is
compared in ``tests/oracle/test_distributed_oracle.py``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tornasole.trials import create_trial

SCRIPT = Path(__file__).parent / "smdebug_scripts" / "dist_train_smdebug.py"
REPO_LAYERS = Path(__file__).resolve().parents[2] / "layers"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(argv_prefix: list[str], out_dir: Path, include_workers: str, env: dict[str, str]) -> None:
    """Start both ranks of ``SCRIPT`` with ``argv_prefix`` (the interpreter and its options); fail with
    their output if either fails."""
    port = str(_free_port())
    procs = [
        subprocess.Popen(
            [*argv_prefix, str(SCRIPT), str(out_dir), str(rank), "2", port, include_workers],
            env=env,
            cwd=out_dir.parent,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(2)
    ]
    outputs = [p.communicate(timeout=180)[0] for p in procs]
    for rank, (p, out) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0, f"rank {rank} failed:\n{out[-3000:]}"


def run_with_tornasole(out_dir: Path, include_workers: str) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORNASOLE_SMDEBUG_ALIAS", "SMDEBUG_CONFIG_FILE_PATH")
    }
    env["PYTHONPATH"] = str(REPO_LAYERS)
    run_ranks([sys.executable, "-m", "tornasole.compat.smdebug_alias"], out_dir, include_workers, env)


def test_include_workers_all_every_rank_writes_and_the_trial_sees_both(tmp_path: Path):
    out = tmp_path / "all"
    run_with_tornasole(out, "all")
    for w in ("worker_0", "worker_1"):
        doc = json.loads((out / f"collections/000000000/{w}_collections.json").read_text())
        assert doc["_meta"] == {"num_workers": 2}
    trial = create_trial(str(out))
    assert sorted(trial.workers()) == ["worker_0", "worker_1"]
    assert trial.steps() == [0, 1, 5]
    names = trial.tensor_names()
    assert {"Net_fc.weight", "Net_fc.bias", "gradient/Net_fc.weight"} <= set(names)
    for name in names:
        tensor = trial.tensor(name)
        assert tensor.steps() == [0, 1, 5], name
        for step in (0, 1, 5):
            assert sorted(tensor.workers(step)) == ["worker_0", "worker_1"], (name, step)
    # gradients are all-reduced: both replicas hold the same weights; their inputs differ (own data)
    weight = trial.tensor("Net_fc.weight")
    np.testing.assert_array_equal(weight.value(5, worker="worker_0"), weight.value(5, worker="worker_1"))
    inputs = trial.tensor("Net_input_0")
    assert not np.array_equal(inputs.value(1, worker="worker_0"), inputs.value(1, worker="worker_1"))


def test_include_workers_one_only_the_chief_writes(tmp_path: Path):
    out = tmp_path / "one"
    run_with_tornasole(out, "one")
    assert sorted(p.name for p in (out / "collections/000000000").iterdir()) == ["worker_0_collections.json"]
    doc = json.loads((out / "collections/000000000/worker_0_collections.json").read_text())
    assert doc["_meta"] == {"num_workers": 1}
    trial = create_trial(str(out))
    assert trial.workers() == ["worker_0"]
    assert trial.steps() == [0, 1, 5]
    assert trial.tensor("Net_fc.weight").workers(5) == ["worker_0"]
    assert not any("worker_1" in p.name for p in out.rglob("*"))


@pytest.mark.parametrize("include_workers", ["all", "one"])
def test_worker_names_match_the_ranks(tmp_path: Path, include_workers: str):
    # the script asserts hook._get_worker_name() == worker_<rank> and _get_num_workers() == 2 itself
    run_with_tornasole(tmp_path / include_workers, include_workers)


def test_ranks_started_by_multiprocessing_spawn_get_the_alias_too(tmp_path: Path):
    # smdebug's distributed tests start ranks with multiprocessing's spawn method: a fresh interpreter that
    # imports the target's module (``import smdebug.pytorch``) without the parent's import hooks
    out = tmp_path / "spawned"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SMDEBUG_CONFIG_FILE_PATH")
    }
    env.update(PYTHONPATH=str(REPO_LAYERS), TORNASOLE_SMDEBUG_ALIAS="1")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT.with_name("dist_spawn_smdebug.py")), str(out), str(_free_port()), "all"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    trial = create_trial(str(out))
    assert sorted(trial.workers()) == ["worker_0", "worker_1"]
    assert trial.steps() == [0, 1, 5]
    assert sorted(trial.tensor("Net_fc.weight").workers(1)) == ["worker_0", "worker_1"]

"""Statistics mode under DDP and FSDP2 (``fully_shard``), two gloo processes on CPU.

Every rank writes its statistics (``include_workers="all"``); under FSDP2 each
rank holds a shard of each parameter (uneven: 7 rows over 2 ranks), and the
statistics written are those of the whole parameter and gradient, checked
against the same statistics computed from unsharded copies (``full_tensor()``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tornasole.trials import create_trial

WORKER = Path(__file__).parent / "torch_dist_scripts" / "statistics_worker.py"
LAYERS = Path(__file__).resolve().parents[2] / "layers"
REDUCTIONS = {
    "l2": ("l2", False),
    "abs_max": ("max", True),
    "mean": ("mean", False),
    "std": ("std", False),
    "zero_fraction": ("zero_fraction", False),
    "nonfinite_count": ("nonfinite_count", False),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(tmp_path: Path, kind: str) -> tuple[Path, list[dict]]:
    out = tmp_path / kind
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = str(LAYERS)
    port = str(_free_port())
    refs = [tmp_path / f"{kind}_reference_{rank}.json" for rank in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(out), str(rank), "2", port, kind, str(refs[rank])],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(2)
    ]
    outputs = [p.communicate(timeout=240)[0] for p in procs]
    for rank, (p, text) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0, f"rank {rank} failed:\n{text[-3000:]}"
    return out, [json.loads(r.read_text()) for r in refs]


@pytest.mark.parametrize("kind", ["ddp", "fsdp"])
def test_every_rank_writes_the_statistics_of_whole_parameters(tmp_path: Path, kind: str):
    out, references = _run(tmp_path, kind)
    trial = create_trial(str(out))
    assert sorted(trial.workers()) == ["worker_0", "worker_1"]
    assert trial.steps() == [0, 1, 2]
    checked = 0
    for rank, reference in enumerate(references):
        worker = f"worker_{rank}"
        for step, tensors in reference.items():
            assert len(tensors) == 8  # 4 parameters, 4 gradients
            for name, values in tensors.items():
                for key, want in values.items():
                    red, abs_ = REDUCTIONS[key]
                    got = float(trial.tensor(name).reduction_value(int(step), red, abs=abs_, worker=worker))
                    assert got == pytest.approx(want, rel=1e-5, abs=1e-7), (worker, step, name, key)
                    checked += 1
    assert checked == 2 * 3 * 8 * 6
    # both ranks see the same whole parameters and gradients (averaged across ranks), shard or replica
    flat = [
        {(s, n, k): v for s, tensors in ref.items() for n, vals in tensors.items() for k, v in vals.items()}
        for ref in references
    ]
    assert flat[0] == pytest.approx(flat[1], rel=1e-5, abs=1e-7)

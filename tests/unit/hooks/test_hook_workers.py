"""Worker identity from launcher variables, and what include_workers="one"/"all" write."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tornasole import Hook, SaveConfig
from tornasole.exceptions import ConfigurationError
from tornasole.hooks.workers import detect_worker


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, (0, 1, "default")),
        ({"HOROVOD_RANK": "2", "HOROVOD_SIZE": "4", "RANK": "0", "WORLD_SIZE": "8"}, (2, 4, "HOROVOD_RANK")),
        ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "3"}, (1, 3, "OMPI_COMM_WORLD_RANK")),
        ({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}, (3, 4, "RANK")),
        ({"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}, (1, 2, "LOCAL_RANK")),
    ],
)
def test_rank_and_world_size_from_environment(env, expected):
    w = detect_worker(env)
    assert (w.rank, w.world_size, w.source) == expected
    assert w.name == f"worker_{expected[0]}"


@pytest.mark.parametrize(
    ("env", "needle"), [({"RANK": "x"}, "RANK='x'"), ({"RANK": "4", "WORLD_SIZE": "4"}, "RANK=4")]
)
def test_bad_launcher_values_are_named(env, needle):
    with pytest.raises(ConfigurationError, match=needle):
        detect_worker(env)


def _save_two_steps(out: Path, include_workers: str) -> None:
    with Hook(str(out), save_config=SaveConfig(save_interval=1), include_workers=include_workers) as hook:
        for i in range(2):
            hook.save_tensor("w", np.full(2, i, dtype=np.float32))
            hook.next_step()


def test_include_workers_one_only_the_chief_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    _save_two_steps(tmp_path / "w1", "one")
    assert not (tmp_path / "w1").exists()
    monkeypatch.setenv("RANK", "0")
    _save_two_steps(tmp_path / "w0", "one")
    doc = json.loads((tmp_path / "w0/collections/000000000/worker_0_collections.json").read_text())
    assert doc["_meta"] == {"num_workers": 1}


def test_include_workers_all_names_files_by_rank_with_world_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    _save_two_steps(tmp_path, "all")
    assert (tmp_path / "index/000000000/000000000001_worker_1.json").exists()
    assert (tmp_path / "events/000000000000/000000000000_worker_1.tfevents").exists()
    doc = json.loads((tmp_path / "collections/000000000/worker_1_collections.json").read_text())
    assert doc["_meta"] == {"num_workers": 2}

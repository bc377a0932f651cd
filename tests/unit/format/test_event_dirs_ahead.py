"""Event directories made ahead in bursts (one per step, smdebug's layout): every step is still written
where readers look, and no directory made for a step that never came is left behind."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tornasole.format.writer import DIRS_AHEAD, TrialWriter
from tornasole.storage.local import LocalStorage
from tornasole.trials import create_trial


def _write(tw: TrialWriter, step: int) -> None:
    sw = tw.step_writer(step)
    sw.add_tensor("x", np.float32(step), wall_time=1.0)
    tw.write_step(sw)


def _empty_dirs(root: Path) -> list[str]:
    events = root / "events"
    return sorted(d.name for d in events.iterdir() if d.is_dir() and not any(d.iterdir()))


@pytest.mark.parametrize(
    "steps",
    [
        list(range(40)),  # every step: bursts of DIRS_AHEAD
        list(range(0, 200, 7)),  # every 7th
        [0, 1, 2, 3, 10, 11, 12, 13, 14, 50, 52, 54, 56, 57, 58],  # the stride changes
        [5],
    ],
)
def test_every_step_is_written_and_no_empty_directory_is_left(tmp_path: Path, steps: list[int]):
    storage = LocalStorage()
    made: list[list[str]] = []
    original = storage.make_dirs
    storage.make_dirs = lambda paths: (made.append(list(paths)), original(paths))[1]
    tw = TrialWriter(str(tmp_path), storage=storage)
    for step in steps:
        _write(tw, step)
    tw.write_collections({}, num_workers=1)
    tw.write_end_marker()
    trial = create_trial(str(tmp_path))
    assert trial.steps() == steps
    assert [float(np.ravel(trial.tensor("x").value(s))[0]) for s in steps] == [float(s) for s in steps]
    assert _empty_dirs(tmp_path) == []
    if len(steps) > 3:  # a regular stride was seen: directories were made in bursts
        assert made
        assert all(len(batch) == DIRS_AHEAD for batch in made)


def test_a_directory_made_ahead_is_kept_while_the_run_goes_on(tmp_path: Path):
    tw = TrialWriter(str(tmp_path), storage=LocalStorage())
    for step in range(3):
        _write(tw, step)
    ahead = _empty_dirs(tmp_path)
    assert ahead == [f"{s:012d}" for s in range(3, 2 + DIRS_AHEAD)]  # steps 3.. made with step 2
    tw.close()
    assert _empty_dirs(tmp_path) == []


def test_another_worker_writing_into_a_directory_removed_meanwhile_still_writes(tmp_path: Path):
    """worker_0 made step 3's directory ahead and closes (removes it, empty) just before worker_1, who
    found it made, writes there: the write makes it again."""
    w0 = TrialWriter(str(tmp_path), worker="worker_0", storage=LocalStorage())
    w1 = TrialWriter(str(tmp_path), worker="worker_1", storage=LocalStorage())
    for step in range(3):
        _write(w0, step)
        _write(w1, step)
    w0.close()
    _write(w1, 3)
    w1.close()
    assert (tmp_path / "events" / "000000000003" / "000000000003_worker_1.tfevents").is_file()
    assert _empty_dirs(tmp_path) == []


def test_a_directory_holding_another_workers_file_is_not_removed(tmp_path: Path):
    w0 = TrialWriter(str(tmp_path), worker="worker_0", storage=LocalStorage())
    w1 = TrialWriter(str(tmp_path), worker="worker_1", storage=LocalStorage())
    for step in range(3):
        _write(w0, step)
    _write(w1, 5)  # into a directory worker_0 made ahead
    w0.close()
    assert (tmp_path / "events" / "000000000005" / "000000000005_worker_1.tfevents").is_file()


def test_a_hook_leaves_no_empty_step_directory(tmp_path: Path):
    import torch
    from torch import nn

    import tornasole.pytorch as ts

    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = ts.Hook(str(tmp_path), statistics=True)
    hook.register_module(model)
    hook.register_optimizer(opt)
    for _ in range(5):
        model(torch.randn(4, 3)).sum().backward()
        opt.step()
        opt.zero_grad()
    hook.close()
    assert create_trial(str(tmp_path)).steps() == [0, 1, 2, 3, 4]
    assert _empty_dirs(tmp_path) == []

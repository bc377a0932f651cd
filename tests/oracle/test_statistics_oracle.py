"""smdebug 1.0.34 reads a trial the PyTorch hook wrote in statistics mode (reductions only, every step).

smdebug's ``Tensor.reduction_value`` returns a stored reduction whatever its
name, so its own names (``l2``, ``abs_max``, ``mean``, ``std``) and Tornasole's
(``zero_fraction``, ``nonfinite_count``) both come back, value for value, as
our reader gives them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from smdebug_runner import run_smdebug
from torch import nn

import tornasole.pytorch as ts
from tornasole.trials import create_trial

READ = """
from smdebug.trials import create_trial
t = create_trial(INPUT["path"])
emit({"steps": t.steps(), "names": sorted(t.tensor_names())})
for name in t.tensor_names():
    tensor = t.tensor(name)
    for step in tensor.steps():
        for red, abs_ in INPUT["reductions"]:
            try:
                save_array(f"{name}|{step}|{red}|{abs_}", tensor.reduction_value(step, red, abs=abs_))
            except Exception:
                pass
        if name.startswith("scalar/") or name.endswith("_output_0"):
            save_array(f"{name}|{step}", tensor.value(step))
"""

REDUCTIONS = [
    ["l2", False],
    ["max", True],
    ["mean", False],
    ["std", False],
    ["zero_fraction", False],
    ["nonfinite_count", False],
]


def test_smdebug_reads_every_statistic_of_a_statistics_mode_trial(tmp_path: Path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2))
    loss_fn = nn.MSELoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = ts.Hook(str(tmp_path), statistics=True)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.register_optimizer(opt)
    for _ in range(3):
        loss_fn(model(torch.randn(8, 5)), torch.randn(8, 2)).backward()
        opt.step()
        opt.zero_grad()
    hook.close()

    theirs = run_smdebug(READ, inputs={"path": str(tmp_path), "reductions": REDUCTIONS})
    ours = create_trial(str(tmp_path))
    assert theirs.data["steps"] == ours.steps() == [0, 1, 2]
    assert theirs.data["names"] == sorted(ours.tensor_names())
    params = [n for n in ours.tensor_names() if n.startswith(("Sequential_", "gradient/"))]
    reduced = [k for k in theirs.arrays if k.count("|") == 3 and k.split("|")[0] in params]
    assert len(params) == 8
    assert len(reduced) == len(params) * 3 * len(REDUCTIONS)  # every statistic of every tensor and step
    for key in reduced:
        name, step, red, abs_ = key.split("|")
        expected = ours.tensor(name).reduction_value(int(step), red, abs=abs_ == "True")
        np.testing.assert_array_equal(
            np.asarray(theirs.arrays[key]).ravel(), np.asarray(expected).ravel(), key
        )
    scalars = [k for k in theirs.arrays if k.count("|") == 1]
    assert {k.split("|")[0] for k in scalars} == {
        "scalar/grad_norm/total",
        "scalar/param_norm/total",
        "scalar/lr/0",
        "MSELoss_output_0",
    }
    for key in scalars:
        name, step = key.split("|")
        np.testing.assert_array_equal(theirs.arrays[key], ours.tensor(name).value(int(step)), key)


STEPS = """
from smdebug.trials import create_trial
t = create_trial(INPUT["path"])
emit({"steps": t.steps(), "names": sorted(t.tensor_names())})
"""


def test_a_killed_runs_empty_step_folders_are_no_steps_to_either_reader(tmp_path: Path):
    """The local writer makes step folders ahead in bursts; a run killed before they are removed leaves
    them empty. Readers find steps by their index files, so both readers see only the steps written."""
    from tornasole.format.writer import DIRS_AHEAD, TrialWriter
    from tornasole.storage.local import LocalStorage

    tw = TrialWriter(str(tmp_path), storage=LocalStorage())
    for step in range(3):
        sw = tw.step_writer(step)
        sw.add_tensor("x", np.float32(step), wall_time=1.0)
        tw.write_step(sw)
    tw.write_collections({}, num_workers=1)
    # killed here: no close, no end marker; the folders made ahead for steps 3.. stay, empty
    events = tmp_path / "events"
    left = sorted(d.name for d in events.iterdir() if d.is_dir() and not any(d.iterdir()))
    assert len(left) == DIRS_AHEAD - 1
    assert create_trial(str(tmp_path)).steps() == [0, 1, 2]
    theirs = run_smdebug(STEPS, inputs={"path": str(tmp_path)})
    assert theirs.data["steps"] == [0, 1, 2]
    assert theirs.data["names"] == ["x"]

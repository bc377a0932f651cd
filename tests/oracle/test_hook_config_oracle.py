"""A hook built from the same DebugHookConfig file saves what smdebug 1.0.34's saves.

The zero-code-change path: both libraries' PyTorch hooks are created by
``create_from_json_file()`` from a file named by ``SMDEBUG_CONFIG_FILE_PATH``
(per-mode ``train.``/``eval.`` keys, hook-wide reductions and regex, per
collection settings), then run the same seeded training. Both trees are read
with our reader: the same tensors at the same steps with the same values, and
collections files that agree on every collection's settings.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from smdebug_runner import run_smdebug

from tornasole.exceptions import TensorUnavailableForStep
from tornasole.trials import create_trial

CONFIG = {
    "HookParameters": {
        "save_interval": "4",
        "eval.save_interval": "1",
        "reductions": "mean,abs_max",
        "save_raw_tensor": True,  # a JSON boolean: smdebug rejects the string
        "include_regex": "fc2_output",
    },
    "CollectionConfigurations": [
        {"CollectionName": "weights"},
        {
            "CollectionName": "gradients",
            "CollectionParameters": {"train.save_steps": "1,2", "save_interval": "3"},
        },
        {"CollectionName": "losses", "CollectionParameters": {"save_interval": "2"}},
        {
            "CollectionName": "relu_act",
            "CollectionParameters": {
                "include_regex": "relu_output_",
                "save_histogram": "false",
                "reductions": "min,l2_norm",
            },
        },
    ],
}

TRAINING = """
import os, torch, torch.nn as nn
import {root}.pytorch as smd
from {root} import modes

torch.manual_seed(0)
os.environ["SMDEBUG_CONFIG_FILE_PATH"] = INPUT["config"]
model = nn.Sequential()
model.add_module("fc1", nn.Linear(5, 4))
model.add_module("relu", nn.ReLU())
model.add_module("fc2", nn.Linear(4, 2))
loss_fn = nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
hook = smd.Hook.create_from_json_file()
hook.register_module(model)
hook.register_loss(loss_fn)
hook.set_mode(modes.TRAIN)
for i in range(9):
    opt.zero_grad()
    loss = loss_fn(model(torch.randn(6, 5)), torch.randn(6, 2))
    loss.backward()
    opt.step()
hook.set_mode(modes.EVAL)
with torch.no_grad():
    for i in range(3):
        loss_fn(model(torch.randn(6, 5)), torch.randn(6, 2))
hook.close()
"""


def _tree(path: Path) -> dict:
    trial = create_trial(str(path))
    out = {"steps": trial.steps(), "tensors": {}}
    for name in trial.tensor_names():
        t = trial.tensor(name)
        values = out["tensors"][name] = {}
        for step in t.steps():
            try:
                values[step] = t.value(step)
            except TensorUnavailableForStep:  # saved as reductions only
                values[step] = dict(sorted(t.reduction_values(step).items()))
    return out


def _collections(path: Path) -> dict:
    doc = json.loads((path / "collections" / "000000000" / "worker_0_collections.json").read_text())
    return {
        name: {k: v for k, v in c.items() if k != "tensor_names"} for name, c in doc["collections"].items()
    }


def test_config_file_hook_saves_what_smdebugs_saves(tmp_path: Path):
    for who in ("ours", "smdebug"):
        cfg = {**CONFIG, "LocalPath": str(tmp_path / who)}
        (tmp_path / f"{who}.json").write_text(json.dumps(cfg))
    exec(  # noqa: S102 - our own constant training script
        compile(TRAINING.format(root="tornasole"), "training", "exec"),
        {"INPUT": {"config": str(tmp_path / "ours.json")}},
    )
    run_smdebug(TRAINING.format(root="smdebug"), inputs={"config": str(tmp_path / "smdebug.json")})

    ours, theirs = _tree(tmp_path / "ours"), _tree(tmp_path / "smdebug")
    assert ours["steps"] == theirs["steps"]
    assert sorted(ours["tensors"]) == sorted(theirs["tensors"])
    for name, by_step in theirs["tensors"].items():
        assert sorted(ours["tensors"][name]) == sorted(by_step), name
        for step, value in by_step.items():
            mine = ours["tensors"][name][step]
            assert isinstance(mine, dict) == isinstance(value, dict), f"{name}@{step}: raw vs reductions"
            if isinstance(value, dict):  # reductions only: the same ones, the same values
                assert list(mine) == list(value), f"{name}@{step}"
                mine, value = list(mine.values()), list(value.values())
            np.testing.assert_allclose(mine, value, rtol=1e-6, err_msg=f"{name}@{step}")
    # the settings each collection was saved with, as written in the collections files
    mine, smd = _collections(tmp_path / "ours"), _collections(tmp_path / "smdebug")
    for name in ("weights", "gradients", "losses", "relu_act", "default"):
        assert mine[name] == smd[name], name
    assert sorted(ours["tensors"]["gradient/Sequential_fc1.weight"]) == [0, 1, 2, 3, 6]  # every 3, and 1, 2

"""``save_scalar`` before, during and after training, with save configs that skip the last TRAIN step:
smdebug 1.0.34 writes every scalar, so must we (at the step it was given in, FORMAT.md 7.4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from smdebug_runner import run_smdebug

from tornasole import modes
from tornasole.trials import create_trial

TRAINING = """
import torch, torch.nn as nn
import {root}.pytorch as smd
from {root}.pytorch import modes

torch.manual_seed(0)
configs = {{
    "save_steps": smd.SaveConfig(save_steps=[0, 2, 4, 6, 8]),
    "per_mode": smd.SaveConfig(mode_save_configs={{
        modes.TRAIN: smd.SaveConfigMode(save_interval=2),
        modes.GLOBAL: smd.SaveConfigMode(save_interval=3),
        modes.EVAL: smd.SaveConfigMode(save_interval=1)}}),
}}
model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
hook = smd.Hook(out_dir=INPUT["out"], include_collections=[INPUT["collection"]],
                save_config=configs[INPUT["config"]])
hook.register_module(model)
hook.save_scalar("num_steps", 10, sm_metric=True)
hook.save_scalar("before_train", 1)
hook.set_mode(modes.TRAIN)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(10):
    opt.zero_grad()
    model(torch.rand(8, 4)).sum().backward()
    opt.step()
hook.save_scalar("after_train", 7)
hook.set_mode(modes.EVAL)
with torch.no_grad():
    for i in range(10):
        model(torch.rand(8, 4))
hook.close()
"""

# After the training above, in the same child (one smdebug start per test): smdebug reads its own tree
# and ours.
READ_BOTH = """
from smdebug.trials import create_trial

def scalars(path):
    t = create_trial(path)
    return {name: [[int(s), float(t.tensor(name).value(s)[0])] for s in t.tensor(name).steps()]
            for name in t.tensor_names(regex="^scalar")}

emit({"smdebug": scalars(INPUT["out"]), "ours": scalars(INPUT["ours"])})
"""


@pytest.mark.parametrize("config", ["save_steps", "per_mode"])
@pytest.mark.parametrize("collection", ["all", "scalars"])
def test_every_scalar_smdebug_writes_we_write(tmp_path: Path, config: str, collection: str):
    ours, theirs = tmp_path / "ours", tmp_path / "smdebug"
    inputs = {"config": config, "collection": collection}
    exec(
        compile(TRAINING.format(root="tornasole"), "training", "exec"),
        {"INPUT": {**inputs, "out": str(ours)}},
    )
    read = run_smdebug(
        TRAINING.format(root="smdebug") + READ_BOTH, inputs={**inputs, "out": str(theirs), "ours": str(ours)}
    ).data
    smd, seen_by_smdebug = read["smdebug"], read["ours"]
    assert (
        sorted(seen_by_smdebug)
        == sorted(smd)
        == ["scalar/after_train", "scalar/before_train", "scalar/num_steps"]
    )
    for name, points in smd.items():
        assert {v for _, v in seen_by_smdebug[name]} == {v for _, v in points}, name
    # ours at the step it was given in (the last TRAIN step, 9); smdebug writes it at an EVAL step
    trial = create_trial(str(ours))
    assert trial.tensor("scalar/after_train").steps(mode=modes.TRAIN) == [9]
    assert trial.tensor("scalar/after_train").steps(mode=modes.EVAL) == []
    assert seen_by_smdebug["scalar/after_train"] == [[9, 7.0]]
    assert smd["scalar/after_train"][0][0] >= 10

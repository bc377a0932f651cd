"""TensorBoard output of the hooks, read back with TensorBoard's own reader (EventAccumulator).

Scenarios: smdebug's ``export_tensorboard`` run (the layout smdebug wrote for
the same training is the reference), ``tensorboard_dir`` alone, reductions as
scalars, ``save_histogram=False``, and the TensorBoardOutputConfig file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch import nn

import tornasole.pytorch as ts
from tornasole import Hook, ReductionConfig, SaveConfig, modes
from tornasole.core.collection import Collection
from tornasole.exceptions import TensorUnavailableForStep
from tornasole.trials import create_trial


def _accumulate(path: Path) -> EventAccumulator:
    ea = EventAccumulator(str(path), size_guidance={"scalars": 0, "histograms": 0})
    ea.Reload()
    return ea


def _train_like_smdebug_fixture(hook: ts.Hook) -> list[float]:
    """The training of the smdebug TensorBoard fixture: TRAIN 4 steps, EVAL 2, save_interval 2."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    loss_fn = nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for mode, n in [(modes.TRAIN, 4), (modes.EVAL, 2)]:
        hook.set_mode(mode)
        for _ in range(n):
            x, y = torch.randn(8, 4), torch.randn(8, 2)
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            losses.append(float(loss.detach()))
            if mode == modes.TRAIN:
                loss.backward()
                opt.step()
    hook.close()
    return losses


def _layout(tb_dir: Path) -> list[str]:
    """``MODE/<step>`` of every event file (the worker part is pid and host, different per run)."""
    names = [p.relative_to(tb_dir).as_posix() for p in tb_dir.rglob("*.tfevents")]
    return sorted(re.sub(r"^(\w+/\d{12})_.*\.tfevents$", r"\1", n) for n in names)


def test_export_tensorboard_matches_smdebug_layout_and_values(tmp_path: Path, fixtures_dir: Path):
    out = tmp_path / "run"
    hook = ts.Hook(
        str(out),
        export_tensorboard=True,
        save_config=SaveConfig(save_interval=2),
        include_collections=["weights", "losses"],
    )
    assert hook.tensorboard_dir == str(out / "tensorboard")
    losses = _train_like_smdebug_fixture(hook)

    smdebug_tb = fixtures_dir / "pt_hook_tensorboard" / "tensorboard"
    assert _layout(out / "tensorboard") == _layout(smdebug_tb)
    ours, theirs = _accumulate(out / "tensorboard" / "TRAIN"), _accumulate(smdebug_tb / "TRAIN")
    assert ours.Tags()["scalars"] == theirs.Tags()["scalars"] == ["MSELoss_output_0"]
    assert sorted(ours.Tags()["histograms"]) == sorted(theirs.Tags()["histograms"])

    # values: the scalar is the loss of that step, the histogram summarizes the weight saved in the trial
    scalars = ours.Scalars("MSELoss_output_0")
    assert [s.step for s in scalars] == [0, 2]
    assert [s.value for s in scalars] == pytest.approx([losses[0], losses[2]], rel=1e-6)
    trial = create_trial(str(out))
    for h in ours.Histograms("weights/Sequential_0.weight"):
        w = trial.tensor("Sequential_0.weight").value(h.step).astype(np.float64)
        hv = h.histogram_value
        assert (hv.num, hv.min, hv.max) == (w.size, pytest.approx(w.min()), pytest.approx(w.max()))
        assert hv.sum == pytest.approx(w.sum())
        assert hv.sum_squares == pytest.approx((w * w).sum())
        assert sum(hv.bucket) == w.size
        assert hv.bucket[0] == 0
        assert all(a < b for a, b in zip(hv.bucket_limit, hv.bucket_limit[1:]))
    # same seed, same training: every histogram and scalar equals what smdebug wrote
    for mode in ("TRAIN", "EVAL"):
        ours, theirs = _accumulate(out / "tensorboard" / mode), _accumulate(smdebug_tb / mode)
        for tag in theirs.Tags()["histograms"]:
            mine = [(h.step, h.histogram_value) for h in ours.Histograms(tag)]
            assert mine == [(h.step, h.histogram_value) for h in theirs.Histograms(tag)]
        mine_s = [(s.step, s.value) for s in ours.Scalars("MSELoss_output_0")]
        assert mine_s == [(s.step, s.value) for s in theirs.Scalars("MSELoss_output_0")]
    eval_scalars = _accumulate(out / "tensorboard" / "EVAL").Scalars("MSELoss_output_0")
    assert [s.step for s in eval_scalars] == [4]  # global step, as smdebug
    assert eval_scalars[0].value == pytest.approx(losses[4], rel=1e-6)


def test_tensorboard_dir_alone_turns_output_on_and_reductions_become_scalars(tmp_path: Path):
    tb_dir = tmp_path / "tb"
    hook = Hook(
        str(tmp_path / "run"),
        tensorboard_dir=str(tb_dir),
        save_config=SaveConfig(save_interval=1),
        reduction_config=ReductionConfig(reductions=["mean"], abs_norms=["l2"]),
        include_collections=["acts"],
    )
    hook.get_collection("acts").include("^act")
    hook.set_mode(modes.TRAIN)
    for step in range(3):
        hook.save_tensor("act", np.array([1.0, -3.0]) * (step + 1), "acts")
        hook.save_scalar("lr", 0.1 * (step + 1))
        hook.next_step()
    hook.close()
    ea = _accumulate(tb_dir / "TRAIN")
    mean = ea.Scalars("smdebug/reductions/mean/act")
    assert [(s.step, s.value) for s in mean] == [(0, -1.0), (1, -2.0), (2, -3.0)]
    l2 = ea.Scalars("smdebug/reductions/abs_l2/act")
    assert [s.value for s in l2] == pytest.approx([np.sqrt(10) * k for k in (1, 2, 3)])
    assert [s.value for s in ea.Scalars("scalar/lr")] == pytest.approx([0.1, 0.2, 0.3])
    # reductions only (no raw tensor): the histogram is still of the full tensor
    hist = ea.Histograms("acts/act")
    assert [(h.step, h.histogram_value.num, h.histogram_value.min) for h in hist] == [
        (0, 2, -3.0),
        (1, 2, -6.0),
        (2, 2, -9.0),
    ]
    saved = create_trial(str(tmp_path / "run")).tensor("act")
    assert saved.reduction_value(1, "mean") == pytest.approx(-2.0)
    with pytest.raises(TensorUnavailableForStep):
        saved.value(1)


def test_save_histogram_false_and_non_numeric_values_write_no_histogram(tmp_path: Path):
    tb_dir = tmp_path / "run" / "tensorboard"
    hook = Hook(str(tmp_path / "run"), export_tensorboard=True, save_config=SaveConfig(save_interval=1))
    hook.add_collection(Collection("quiet", include_regex="^q", save_histogram=False))
    hook.add_collection(Collection("flags", include_regex="^flag"))
    hook.save_tensor("q", np.ones(3), "quiet")
    hook.save_tensor("flag", np.array([True, False]), "flags")
    hook.save_tensor("shown", np.arange(4.0), "default")
    hook.close()
    ea = _accumulate(tb_dir / "GLOBAL")
    assert ea.Tags()["histograms"] == ["default/shown"]
    assert set(create_trial(str(tmp_path / "run")).tensor_names()) == {"q", "flag", "shown"}


def test_no_tensorboard_output_unless_asked(tmp_path: Path):
    hook = Hook(str(tmp_path / "run"), save_config=SaveConfig(save_interval=1))
    assert hook.tensorboard_dir is None
    hook.save_tensor("x", np.ones(2))
    hook.close()
    assert not (tmp_path / "run" / "tensorboard").exists()


def test_tensorboard_output_config_file_sets_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tb_cfg = tmp_path / "tensorboardoutputconfig.json"
    tb_cfg.write_text(json.dumps({"LocalPath": str(tmp_path / "tb"), "S3OutputPath": "s3://b/tb"}))
    hook_cfg = tmp_path / "debughookconfig.json"
    hook_cfg.write_text(
        json.dumps({"LocalPath": str(tmp_path / "run"), "HookParameters": {"save_interval": "1"}})
    )
    monkeypatch.setenv("TENSORBOARD_CONFIG_FILE_PATH", str(tb_cfg))
    hook = Hook.create_from_json_file(str(hook_cfg))
    assert hook.tensorboard_dir == str(tmp_path / "tb")
    hook.save_scalar("acc", 0.5)
    hook.close()
    assert _accumulate(tmp_path / "tb" / "GLOBAL").Scalars("scalar/acc")[0].value == 0.5

    monkeypatch.setenv("TENSORBOARD_CONFIG_FILE_PATH", str(tmp_path / "absent.json"))
    with pytest.raises(Exception, match=r"absent\.json.*TENSORBOARD_CONFIG_FILE_PATH"):
        ts.Hook.create_from_json_file(str(hook_cfg))


def test_hook_parameters_export_tensorboard(tmp_path: Path):
    hook_cfg = tmp_path / "debughookconfig.json"
    doc = {"LocalPath": str(tmp_path / "run"), "HookParameters": {"export_tensorboard": "true"}}
    hook_cfg.write_text(json.dumps(doc))
    hook = Hook.create_from_json_file(str(hook_cfg), enabled=False)
    assert hook.tensorboard_dir == str(tmp_path / "run" / "tensorboard")
    doc["HookParameters"]["tensorboard_dir"] = str(tmp_path / "elsewhere")
    hook_cfg.write_text(json.dumps(doc))
    assert Hook.create_from_json_file(str(hook_cfg), enabled=False).tensorboard_dir == str(
        tmp_path / "elsewhere"
    )

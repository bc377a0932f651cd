"""smdebug 1.0.34 reads the steps a capture request filled: full tensors at the captured steps and the
statistics mode's reductions at every step, in the same files as any saved step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from smdebug_runner import run_smdebug
from torch import nn

import tornasole.pytorch as ts
from tornasole.format.capture_request import CaptureRequest, capture_request_file_name
from tornasole.hooks.capture_window import CaptureRequestPoller
from tornasole.storage.schemes import get_storage

READ = """
from smdebug.trials import create_trial
t = create_trial(INPUT["path"])
w = t.tensor("Sequential_0.weight")
emit({"steps": t.steps(), "weight_steps": w.steps(),
      "values": {str(s): w.value(s).tolist() for s in INPUT["captured"]},
      "norms": {str(s): float(w.reduction_value(s, "l2")) for s in w.steps()},
      "gradients": sorted(t.tensor_names(collection="gradients"))})
"""


def test_smdebug_reads_captured_full_tensors_beside_the_statistics(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = tmp_path / "run"
    hook = ts.Hook(
        str(out),
        statistics=ts.StatisticsConfig(statistics=("norm",)),
        save_config=ts.SaveConfig(save_interval=1000),
        stop_check_interval=None,
        capture_check_interval=None,
    )
    hook._capture_poller = CaptureRequestPoller(get_storage(str(out)), str(out))
    hook.register_module(model)
    hook.register_optimizer(opt)
    weights = {}
    for step in range(6):
        weights[step] = model[0].weight.detach().numpy().copy()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        if step == 1:
            path = out / capture_request_file_name("R")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(CaptureRequest("j:1:capture/R", 2, ("gradients", "weights"), rule="R").encode())
            hook._capture_poller.check_now()
    hook.close()
    captured = hook._capture_window.captured_steps
    assert captured == [2, 3]
    got = run_smdebug(READ, inputs={"path": str(out), "captured": captured}).data
    assert got["steps"] == list(range(6))
    assert got["weight_steps"] == list(range(6))
    for s in captured:
        np.testing.assert_allclose(np.array(got["values"][str(s)]), weights[s], rtol=1e-6)
    for s in range(6):
        assert np.isclose(got["norms"][str(s)], np.linalg.norm(weights[s]), rtol=1e-5), s
    assert "gradient/Sequential_0.weight" in got["gradients"]

"""Capture on demand in the PyTorch hook: full weights and gradients for the N steps after a request, in the
plain hook and in statistics mode (where only reductions are saved otherwise), readable by the Trial API."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import tornasole.pytorch as ts
from tornasole.exceptions import TensorUnavailableForStep
from tornasole.format.capture_request import CaptureRequest, capture_request_file_name
from tornasole.hooks.capture_window import CaptureRequestPoller
from tornasole.storage.schemes import get_storage
from tornasole.trials import create_trial


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def train(out: Path, steps: int, request_after: int, request: CaptureRequest, **hook_kwargs):
    """Train ``steps`` optimizer steps; after step ``request_after`` a request lands and the poller sees it.
    Returns the parameters and gradients each step used, by step."""
    torch.manual_seed(0)
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    hook = ts.Hook(str(out), stop_check_interval=None, capture_check_interval=None, **hook_kwargs)
    hook._capture_poller = CaptureRequestPoller(get_storage(str(out)), str(out))  # polled when told (below)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    if hook.statistics is not None:
        hook.register_optimizer(opt)
    seen: dict[int, dict[str, np.ndarray]] = {}
    for step in range(steps):
        seen[step] = {f"Net_{n}": p.detach().numpy().copy() for n, p in model.named_parameters()}
        g = torch.Generator().manual_seed(step)
        x, y = torch.randn(7, 6, generator=g), torch.randint(0, 3, (7,), generator=g)
        loss_fn(model(x), y).backward()
        for n, p in model.named_parameters():
            seen[step][f"gradient/Net_{n}"] = p.grad.numpy().copy()
        opt.step()
        opt.zero_grad()
        if step == request_after:
            path = out / capture_request_file_name(request.rule)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(request.encode())
            assert hook._capture_poller.check_now() == 1
    hook.close()
    return hook, seen


REQUEST = CaptureRequest("job:1:capture/R", 3, ("gradients", "weights"), rule="R", job="job", step=2)


def test_plain_hook_saves_full_weights_and_gradients_for_the_requested_steps(tmp_path: Path):
    hook, seen = train(
        tmp_path,
        steps=10,
        request_after=2,
        request=REQUEST,
        save_config=ts.SaveConfig(save_interval=1000),
        include_collections=["losses"],
    )
    trial = create_trial(str(tmp_path))
    assert hook._capture_window.captured_steps == [3, 4, 5]
    for name in ("Net_fc1.weight", "Net_fc2.weight", "gradient/Net_fc1.weight", "gradient/Net_fc2.bias"):
        assert trial.tensor(name).steps() == [3, 4, 5], name
        for step in (3, 4, 5):
            np.testing.assert_allclose(trial.tensor(name).value(step), seen[step][name], rtol=1e-6)
    assert "Net_fc2.bias" not in trial.tensor_names()  # biases were not asked for
    # the losses follow the save config alone (step 0); the collections file lists what was captured
    assert trial.tensor("CrossEntropyLoss_output_0").steps() == [0]
    assert "Net_fc1.weight" in trial.tensor_names(collection="weights")
    assert "gradient/Net_fc1.weight" in trial.tensor_names(collection="gradients")


def test_statistics_mode_saves_full_tensors_at_the_captured_steps_only(tmp_path: Path):
    hook, seen = train(
        tmp_path,
        steps=8,
        request_after=1,
        request=REQUEST,
        statistics=ts.StatisticsConfig(statistics=("norm",)),
        save_config=ts.SaveConfig(save_interval=1000),
    )
    trial = create_trial(str(tmp_path))
    assert trial.steps() == list(range(8))  # statistics every step
    captured = hook._capture_window.captured_steps
    assert captured == [2, 3, 4]
    for name in ("Net_fc1.weight", "gradient/Net_fc2.weight"):
        tensor = trial.tensor(name)
        assert tensor.steps() == list(range(8))  # the norm at every step
        for step in range(8):
            norm = float(tensor.reduction_value(step, "l2"))
            assert norm == pytest.approx(float(np.linalg.norm(seen[step][name])), rel=1e-5)
            if step in captured:
                np.testing.assert_allclose(tensor.value(step), seen[step][name], rtol=1e-6)
            else:
                with pytest.raises(TensorUnavailableForStep):  # reductions only
                    tensor.value(step)

"""Statistics mode on a CUDA device: computed on the GPU, one pinned copy a step, the values training saw.

The statistics of each step are checked against numpy on device clones taken
in the loop (copied to the host only after training). A long sleep kernel
ahead of the last step keeps its copy queued when ``close()`` starts: the
writer must wait on the step's event, not read a stale pinned buffer. A
compiled model (inductor) trains with the hook without graph breaks.

Run with ``make test-gpu`` on a machine with CUDA.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch._dynamo.utils import counters

import tornasole.pytorch as ts
from tornasole.pytorch.capture import TorchCapture
from tornasole.trials import create_trial

CUDA = torch.device("cuda")


@pytest.fixture(autouse=True, scope="module")
def _require_cuda() -> None:
    if not torch.cuda.is_available():
        pytest.fail("tests/gpu needs a CUDA device (torch.cuda.is_available() is False)", pytrace=False)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, 1024)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(1024, 10)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def _stats(a: np.ndarray) -> dict[tuple[str, bool], float]:
    a = a.astype(np.float64).ravel()
    return {
        ("l2", False): float(np.linalg.norm(a)),
        ("max", True): float(np.abs(a).max()),
        ("mean", False): float(a.mean()),
        ("std", False): float(a.std(ddof=1)),
        ("zero_fraction", False): float(np.mean(a == 0)),
        ("nonfinite_count", False): float(np.sum(~np.isfinite(a))),
    }


def _batch(i: int):
    g = torch.Generator().manual_seed(i)
    return torch.randn(32, 64, generator=g).to(CUDA), torch.randint(0, 10, (32,), generator=g).to(CUDA)


@pytest.mark.parametrize("dtype", [None, torch.bfloat16, torch.float16], ids=["fp32", "bf16", "fp16"])
def test_statistics_on_the_device_match_what_training_saw(tmp_path: Path, monkeypatch, dtype):
    copies: list[tuple[str, bool]] = []
    original = TorchCapture.capture

    def recording(self, t):
        out = original(self, t)
        copies.append((t.device.type, out.is_pinned()))
        return out

    monkeypatch.setattr(TorchCapture, "capture", recording)
    torch.manual_seed(0)
    model, loss_fn = Net().to(CUDA), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda") if dtype == torch.float16 else None
    hook = ts.Hook(str(tmp_path), statistics=ts.StatisticsConfig(activations=True))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.register_optimizer(opt)
    if scaler is not None:
        hook.register_grad_scaler(scaler)
    seen = {}
    steps = 4
    for step in range(steps):
        x, y = _batch(step)
        if step == steps - 1:
            torch.cuda._sleep(200_000_000)  # the device is busy: the last step's copy stays queued
        weights = {f"Net_{n}": p.detach().clone() for n, p in model.named_parameters()}
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            out = model(x)
            loss = loss_fn(out, y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
        else:
            loss.backward()
        grads = {f"gradient/Net_{n}": p.grad.detach().clone() for n, p in model.named_parameters()}
        seen[step] = {
            **weights,
            **grads,
            "fc1_output_0": model.fc1(x).detach().clone() if dtype is None else None,
        }
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad()
    hook.close()
    assert copies == [("cuda", True)] * steps  # one pinned copy a step
    trial = create_trial(str(tmp_path))
    assert trial.steps() == list(range(steps))
    for step, tensors in seen.items():
        for name, value in tensors.items():
            if value is None:
                continue
            for (red, abs_), want in _stats(value.float().cpu().numpy()).items():
                got = float(trial.tensor(name).reduction_value(step, red, abs=abs_))
                assert got == pytest.approx(want, rel=1e-4, abs=1e-6), (name, step, red, abs_)
    if scaler is not None:
        assert float(trial.tensor("scalar/loss_scale").value(0)) == 65536.0


def test_a_compiled_model_trains_with_the_hook_without_graph_breaks(tmp_path: Path):
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model, loss_fn = Net().to(CUDA), nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    hook = ts.Hook(str(tmp_path), statistics=True)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.register_optimizer(opt)
    compiled = torch.compile(model)
    for step in range(3):
        x, y = _batch(step)
        with torch.compiler.set_stance("fail_on_recompile" if step else "default"):
            loss_fn(compiled(x), y).backward()
        opt.step()
        opt.zero_grad()
    hook.close()
    assert sum(counters["graph_break"].values()) == 0
    assert counters["stats"]["unique_graphs"] == 1
    assert create_trial(str(tmp_path)).steps() == [0, 1, 2]
    torch._dynamo.reset()

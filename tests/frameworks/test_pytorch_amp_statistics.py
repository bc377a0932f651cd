"""Statistics mode under mixed precision and gradient accumulation.

* bf16 and fp16 autocast: the statistics of a 16-bit activation are those of
  the values training saw (reduced in float32), weights and gradients those of
  the float32 master copies;
* a registered ``torch.amp.GradScaler``: every step saves the scale it used and
  the count of skipped steps, and a step the scaler skips (inf gradients, so
  ``optimizer.step()`` never runs) is still a step, with its non-finite gradients
  counted;
* gradient accumulation: one saved step per optimizer step, whose gradient
  statistics are those of the accumulated gradient.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import tornasole.pytorch as ts
from tornasole.rules import invoke_rule
from tornasole.rules.builtin import LossScaleCollapse
from tornasole.trials import create_trial


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def _batch(i: int):
    g = torch.Generator().manual_seed(i)
    return torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)


def _stats(a: np.ndarray) -> dict[tuple[str, bool], float]:
    a = np.asarray(a, dtype=np.float64).ravel()
    return {
        ("l2", False): float(np.linalg.norm(a)),
        ("max", True): float(np.abs(a).max()),
        ("mean", False): float(a.mean()),
        ("std", False): float(a.std(ddof=1)),
        ("zero_fraction", False): float(np.mean(a == 0)),
        ("nonfinite_count", False): float(np.sum(~np.isfinite(a))),
    }


def _check(trial, name: str, step: int, array: np.ndarray) -> None:
    for (red, abs_), want in _stats(array).items():
        got = float(trial.tensor(name).reduction_value(step, red, abs=abs_))
        assert got == pytest.approx(want, rel=1e-5, abs=1e-6), (name, step, red, abs_)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_autocast_statistics_are_those_of_the_16_bit_values_training_saw(tmp_path: Path, dtype):
    torch.manual_seed(0)
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = ts.Hook(str(tmp_path), statistics=ts.StatisticsConfig(activations=True))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.register_optimizer(opt)
    seen = []
    model.fc1.register_forward_hook(lambda m, i, o: seen.append(o.detach().clone()))
    grads = []
    for step in range(3):
        x, y = _batch(step)
        with torch.autocast("cpu", dtype=dtype):
            loss = loss_fn(model(x), y)
        loss.backward()
        grads.append(model.fc1.weight.grad.clone())
        opt.step()
        opt.zero_grad()
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0, 1, 2]
    for step in range(3):
        assert seen[step].dtype == dtype  # the activation really was 16-bit
        _check(trial, "fc1_output_0", step, seen[step].float().numpy())
        _check(trial, "gradient/Net_fc1.weight", step, grads[step].numpy())


def test_grad_scaler_scale_and_skipped_steps_are_saved_every_step(tmp_path: Path):
    torch.manual_seed(0)
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=2)
    hook = ts.Hook(str(tmp_path), statistics=True)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.register_optimizer(opt)
    hook.register_grad_scaler(scaler)
    scales, inf_grads = [], {}
    for step in range(5):
        x, y = _batch(step)
        with torch.autocast("cpu", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        if step in (1, 2):  # an overflow: the scaler skips these steps and halves its scale
            model.fc2.weight.grad[0, :2] = float("inf")
        scales.append(scaler.get_scale())
        scaler.unscale_(opt)
        inf_grads[step] = model.fc2.weight.grad.clone()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    hook.close()
    assert scales == [1024.0, 1024.0, 512.0, 256.0, 256.0]  # skipped steps halve it
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0, 1, 2, 3, 4]  # skipped steps are steps
    assert [float(trial.tensor("scalar/loss_scale").value(s)) for s in range(5)] == scales
    assert [float(trial.tensor("scalar/skipped_steps").value(s)) for s in range(5)] == [0, 1, 2, 2, 2]
    assert [float(trial.tensor("scalar/skipped_step").value(s)) for s in range(5)] == [0, 1, 1, 0, 0]
    # The rule for a collapsing scaler reads what the hook saved (the names of tornasole.core.llm_signals):
    # 2 of the last 4 steps skipped is more than 0.4 of them: judged from step 3 (4 steps saved) on.
    collapse = LossScaleCollapse(trial, max_skip_fraction="0.4", skip_window="4", num_steps="10")
    assert invoke_rule(collapse).fired_steps == [3, 4]
    nonfinite = [
        float(trial.tensor("gradient/Net_fc2.weight").reduction_value(s, "nonfinite_count")) for s in range(5)
    ]
    assert nonfinite == [0, 2, 2, 0, 0]
    for step in (0, 3, 4):  # unscaled gradients, as the optimizer used them
        _check(trial, "gradient/Net_fc2.weight", step, inf_grads[step].numpy())
    assert scaler.update.__func__ is torch.amp.GradScaler.update  # close() gave the scaler its update back


def test_gradient_accumulation_saves_one_step_per_optimizer_step(tmp_path: Path):
    torch.manual_seed(0)
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = ts.Hook(str(tmp_path), statistics=ts.StatisticsConfig(statistics=("norm",)))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.register_optimizer(opt)
    accumulated, losses = [], []
    micro = 4
    for step in range(3):
        total = 0.0
        for k in range(micro):
            x, y = _batch(10 * step + k)
            loss = loss_fn(model(x), y)
            (loss / micro).backward()
            total += loss.item()
        accumulated.append(model.fc1.weight.grad.clone())
        losses.append(total / micro)
        opt.step()
        opt.zero_grad()
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0, 1, 2]  # 12 forward passes, 3 optimizer steps
    for step in range(3):
        got = float(trial.tensor("gradient/Net_fc1.weight").reduction_value(step, "l2"))
        assert got == pytest.approx(float(torch.linalg.vector_norm(accumulated[step])), rel=1e-6)
        assert float(trial.tensor("CrossEntropyLoss_output_0").value(step)) == pytest.approx(
            losses[step], rel=1e-6
        )

"""Helpers for rule tests: small trials written with our format writer; tiny real PyTorch training.

``write_trial(path, steps, collections)`` writes ``steps`` — ``{step: {tensor: value}}`` or
``{step: (mode, mode_step, {tensor: value})}`` — and collections ``{name: [include regexes]}``
(one worker; the end marker unless ``end=False``). Wall times are ``1000 + step``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tornasole.core.collection import Collection
from tornasole.format.writer import TrialWriter
from tornasole.modes import GLOBAL

DEFAULT_COLLECTIONS = {
    "gradients": ["^gradients/"],
    "weights": ["^weights/"],
    "losses": ["^loss"],
}


def write_trial(
    path: str,
    steps: dict[int, Any],
    collections: dict[str, list[str]] | None = None,
    end: bool = True,
) -> str:
    tw = TrialWriter(path)
    colls = DEFAULT_COLLECTIONS if collections is None else collections
    tw.write_collections(
        {name: Collection(name, include_regex=list(rx)).to_json_dict() for name, rx in colls.items()}, 1
    )
    for step in sorted(steps):
        spec = steps[step]
        mode, mode_step, tensors = spec if isinstance(spec, tuple) else (GLOBAL, step, spec)
        sw = tw.step_writer(step, mode=mode, mode_step=mode_step)
        for name, value in tensors.items():
            sw.add_tensor(name, np.asarray(value), wall_time=1000.0 + step)
        tw.write_step(sw)
    if end:
        tw.write_end_marker()
    return path


def train_mlp(
    steps: int = 6,
    lr: float = 0.01,
    relu_bias: float | None = None,
    freeze_fc1: bool = False,
    seed: int = 0,
) -> dict[int, dict[str, Any]]:
    """Train a 4-8-1 MLP on a fixed regression batch; return ``{step: {tensor name: value}}``.

    Names: ``weights/fc1.weight``, ``gradients/fc1.weight``, ``gradients/fc2.weight``,
    ``fc1_relu_output``, ``loss``. ``relu_bias`` sets fc1's bias (a large negative value kills
    the ReLUs); ``freeze_fc1`` excludes fc1 from the optimiser.
    """
    import torch

    torch.set_num_threads(1)  # deterministic float overflow order
    torch.manual_seed(seed)
    x = torch.randn(32, 4)
    y = (x.sum(dim=1, keepdim=True) * 3.0) ** 2
    fc1, fc2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 1)
    if relu_bias is not None:
        with torch.no_grad():
            fc1.bias.fill_(relu_bias)
    params = list(fc2.parameters()) + ([] if freeze_fc1 else list(fc1.parameters()))
    opt = torch.optim.SGD(params, lr=lr)
    out: dict[int, dict[str, Any]] = {}
    for step in range(steps):
        opt.zero_grad()
        h = torch.relu(fc1(x))
        loss = torch.nn.functional.mse_loss(fc2(h), y)
        loss.backward()
        out[step] = {
            "weights/fc1.weight": fc1.weight.detach().numpy().copy(),
            "gradients/fc1.weight": (
                fc1.weight.grad.numpy().copy()
                if fc1.weight.grad is not None
                else np.zeros((8, 4), np.float32)
            ),
            "gradients/fc2.weight": fc2.weight.grad.numpy().copy(),
            "fc1_relu_output": h.detach().numpy().copy(),
            "loss": np.float32(loss.item()),
        }
        opt.step()
    return out


def torch_lrs(make_scheduler, steps: int, peak: float) -> list[float]:
    """The rate PyTorch's own scheduler (``make_scheduler(optimizer)``) sets before each of ``steps``
    optimiser steps of an SGD with momentum at ``peak``: the schedule exactly as a user's run sees it."""
    import torch

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=peak, momentum=0.9)
    sched = make_scheduler(opt)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out

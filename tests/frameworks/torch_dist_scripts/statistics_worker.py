"""One rank of a two-process gloo run in statistics mode: plain DDP or FSDP2 (``fully_shard``).

Usage: ``statistics_worker.py OUT RANK WORLD PORT {ddp,fsdp} REFERENCE.json``. Each rank trains on its
own data and writes (``include_workers="all"``); REFERENCE.json receives, per step, the statistics of
the *whole* parameters and gradients computed here from unsharded copies (``full_tensor()`` under
FSDP2), which the test compares with what the trial holds.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

import tornasole.pytorch as ts

out, rank, world, port, kind, reference = sys.argv[1:7]
rank, world = int(rank), int(world)
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank), WORLD_SIZE=str(world))
dist.init_process_group("gloo", rank=rank, world_size=world)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(5, 7)  # 7 rows over 2 ranks: uneven shards (4 + 3)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(7, 3)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


torch.manual_seed(0)
model = Net()
if kind == "fsdp":
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))
    fully_shard(model.fc1, mesh=mesh)
    fully_shard(model.fc2, mesh=mesh)
    fully_shard(model, mesh=mesh)
    run = model
else:
    run = nn.parallel.DistributedDataParallel(model)
loss_fn = nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
hook = ts.Hook(out, statistics=True, include_workers="all")
hook.register_module(model)  # after fully_shard: the parameters it registers are the sharded ones
hook.register_loss(loss_fn)
hook.register_optimizer(opt)


def full(t: torch.Tensor) -> np.ndarray:
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach().numpy().astype(np.float64)


def stats(a: np.ndarray) -> dict[str, float]:
    a = a.ravel()
    return {
        "l2": float(np.linalg.norm(a)),
        "abs_max": float(np.abs(a).max()),
        "mean": float(a.mean()),
        "std": float(a.std(ddof=1)),
        "zero_fraction": float(np.mean(a == 0)),
        "nonfinite_count": float(np.sum(~np.isfinite(a))),
    }


expected: dict[str, dict[str, dict[str, float]]] = {}
for step in range(3):
    g = torch.Generator().manual_seed(100 * rank + step)
    x, y = torch.randn(6, 5, generator=g), torch.randint(0, 3, (6,), generator=g)
    weights = {f"Net_{n}": full(p) for n, p in model.named_parameters()}
    loss_fn(run(x), y).backward()
    grads = {f"gradient/Net_{n}": full(p.grad) for n, p in model.named_parameters()}
    expected[str(step)] = {n: stats(a) for n, a in {**weights, **grads}.items()}
    opt.step()
    opt.zero_grad()
hook.close()
with open(reference, "w") as f:
    json.dump(expected, f)
dist.destroy_process_group()

"""One rank of the two-process torch.distributed (gloo, CPU) hook test; run as a script.

Usage: python dist_worker.py OUT_DIR RANK WORLD_SIZE PORT

Mirrors the fixture generator ``scripts/fixtures/distributed_tree.py`` (which runs
smdebug's hook): manual gradient all-reduce, ``include_workers="all"``, 12 TRAIN
steps, save_interval 4. Also used by the oracle test.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
from torch import nn


def main(out_dir: str, rank: int, world: int, port: int) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    import tornasole.pytorch as ts
    from tornasole import modes

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    loss_fn = nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    hook = ts.Hook(
        out_dir,
        save_config=ts.SaveConfig(save_interval=4),
        include_collections=["weights", "gradients", "losses"],
        include_workers="all",
        stop_check_interval=None,
    )
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(modes.TRAIN)
    torch.manual_seed(100 + rank)
    for _ in range(12):
        x, y = torch.randn(8, 4), torch.randn(8, 2)
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
    hook.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))

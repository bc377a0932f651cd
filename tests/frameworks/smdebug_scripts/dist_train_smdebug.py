"""One rank of a two-process torch.distributed (gloo, CPU) run written against smdebug's API only.

Usage: python dist_train_smdebug.py OUT_DIR RANK WORLD_SIZE PORT INCLUDE_WORKERS

Runs unchanged on smdebug 1.0.34 and on Tornasole through the ``smdebug`` alias, as smdebug's own
distributed test does: ``save_all`` with ``save_steps=[0, 1, 5]``, gradients all-reduced by hand with
``dist.reduce_op.SUM``, the worker name checked with ``hook._get_worker_name()``, ``hook._cleanup()``.
"""

import os
import sys

import smdebug.pytorch as smd
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.add_module("fc", nn.Linear(1, 1))

    def forward(self, x):
        return torch.sigmoid(self.fc(x))


def main(out_dir, rank, world, port, include_workers):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(1234)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=1)
    hook = smd.Hook(
        out_dir=out_dir,
        save_config=smd.SaveConfig(save_steps=[0, 1, 5]),
        save_all=True,
        include_workers=include_workers,
    )
    hook.register_module(model)
    torch.manual_seed(1 + rank)
    for _ in range(3):
        for _ in range(4):
            optimizer.zero_grad()
            data = torch.rand(8, 1)
            loss = F.mse_loss(model(data), torch.sigmoid(2 * data + 1))
            loss.backward()
            for param in model.parameters():
                dist.all_reduce(param.grad.data, op=dist.reduce_op.SUM)
                param.grad.data /= float(world)
            optimizer.step()
    assert hook._get_worker_name() == f"worker_{dist.get_rank()}", hook._get_worker_name()
    assert hook._get_num_workers() == world
    hook._cleanup()
    dist.barrier()
    dist.destroy_process_group()


def main_then_exit(out_dir: str, rank: int, world: int, port: int, include_workers: str) -> None:
    """``main``, then leave without the interpreter's teardown: everything is written and the group is gone,
    but gloo's threads can still be joinable there and abort the process ("terminate called without an
    active exception", about 1 run in 8), a torch shutdown race that says nothing about the hook."""
    main(out_dir, rank, world, port, include_workers)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    out, rank, world, port, include = sys.argv[1:6]
    main_then_exit(out, int(rank), int(world), int(port), include)

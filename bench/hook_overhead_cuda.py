"""How much a hook slows training on a CUDA GPU: no hook vs Tornasole's hook vs smdebug 1.0.34's hook.

On a GPU the question is whether saving stalls the device. Our hook queues each
saved tensor as a non-blocking copy into pinned host memory and lets the writer
thread wait for the copies once per step; smdebug copies each tensor to the
host with a blocking ``.cpu()`` on the training thread. Two models, both on
``cuda:0`` with synthetic data:

- ``convnet``: three 3x3 convolutions (64, 128, 256 channels) and a linear
  head, batch 128 of 3x32x32 images (0.4 M weights); saves at intervals 1, 10
  and 100, with the default collections (the loss) and with weights and
  gradients added;
- ``mlp_large``: three 4096-wide linear layers, batch 512 (50 M weights, 200 MB
  in float32); weights and gradients every 100 steps (400 MB a saved step).

Each configuration runs ``--steps`` steps after 20 untimed warm-up steps,
timed with the device synchronised at both ends and ``hook.close()`` inside the
timing (our writer's draining is counted); hooked and unhooked runs alternate,
``--repeats`` of each, and the fastest of each is kept. Printed: milliseconds a
step without a hook, each hook's slowdown, and our slowdown over smdebug's.

smdebug runs in a subprocess: by default ``.venv-smdebug/bin/python``; on a
machine whose CUDA torch lives in another interpreter, ``--smdebug-path DIR``
runs this interpreter with ``DIR`` (smdebug 1.0.34, protobuf 3.20, numpy 2.2)
first on ``PYTHONPATH``.

Usage::

    python bench/hook_overhead_cuda.py [--steps 300] [--repeats 3] [--configs convnet@100,...]
                                       [--smdebug-path DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hook_overhead import _factory, sgd_steps  # the CPU benchmark's hooks and loop (bench/ is on sys.path)

REPO = Path(__file__).resolve().parents[1]
SMDEBUG_PYTHON = REPO / ".venv-smdebug" / "bin" / "python"
SAVED = "weights,gradients"
# (model, interval, extra collections)
CONFIGS = [
    ("convnet", 1, ""),
    ("convnet", 10, ""),
    ("convnet", 100, ""),
    ("convnet", 1, SAVED),
    ("convnet", 10, SAVED),
    ("convnet", 100, SAVED),
    ("mlp_large", 100, SAVED),
]


def _key(name: str, interval: int, colls: str) -> str:
    """A configuration's name on the command line (``--configs``): ``convnet@100``, ``convnet@10+wg``."""
    return f"{name}@{interval}" + ("+wg" if colls else "")


def _model(name: str):
    import torch
    from torch import nn

    if name == "convnet":
        model = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(64, 128, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(128, 256, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(256, 10),
        )
        x = torch.randn(128, 3, 32, 32)
        y = torch.randint(0, 10, (128,))
    else:
        model = nn.Sequential(
            nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10)
        )
        x, y = torch.randn(512, 4096), torch.randint(0, 10, (512,))
    return model.cuda(), x.cuda(), y.cuda()


def _train(name: str, steps: int, make_hook) -> float:
    """Wall seconds for ``steps`` steps plus ``close()``, the device synchronised at both ends."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model, x, y = _model(name)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    hook = make_hook() if make_hook else None
    if hook is not None:
        hook.register_module(model)
        hook.register_loss(loss_fn)
    sgd_steps(model, loss_fn, opt, x, y, 20)  # warm-up, untimed
    torch.cuda.synchronize()
    start = time.perf_counter()
    sgd_steps(model, loss_fn, opt, x, y, steps)
    if hook is not None:
        hook.close()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def worker(impl: str, steps: int, repeats: int, only: list[str]) -> dict[str, dict[str, float]]:
    results = {}
    for name, interval, colls in CONFIGS:
        if _key(name, interval, colls) not in only:
            continue
        base, hooked = [], []
        for r in range(repeats):
            if r % 2:
                base.append(_train(name, steps, None))
            out = tempfile.mkdtemp(prefix=f"bench-cuda-{impl}-")
            shutil.rmtree(out)  # smdebug wants a fresh directory
            try:
                make_hook = _factory(impl, out, interval, colls.split(",") if colls else [])
                hooked.append(_train(name, steps, make_hook))
            finally:
                shutil.rmtree(out, ignore_errors=True)
            if not r % 2:
                base.append(_train(name, steps, None))
        results[_key(name, interval, colls)] = {"base": min(base), "hook": min(hooked)}
    return results


def _run_worker(impl: str, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    env = dict(os.environ)
    paths = [str(REPO / "layers")]
    python = sys.executable
    if impl == "smdebug":
        if args.smdebug_path:
            paths.insert(0, args.smdebug_path)
        else:
            python = str(SMDEBUG_PYTHON)
    # An empty PYTHONPATH entry would put the working directory on the path: only non-empty ones are joined.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (*paths, env.get("PYTHONPATH", "")) if p)
    cmd = [python, __file__, "--worker", impl, "--steps", str(args.steps), "--repeats", str(args.repeats)]
    cmd += ["--configs", args.configs]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        sys.exit(f"{impl} worker failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smdebug-path", default="", help="directory with smdebug 1.0.34")
    every = ",".join(_key(*c) for c in CONFIGS)
    ap.add_argument("--configs", default=every, help=f"comma separated, of {every}")
    ap.add_argument("--worker", choices=("tornasole", "smdebug"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.steps, args.repeats, args.configs.split(","))))
        return
    import torch

    if not torch.cuda.is_available():
        sys.exit("no CUDA device: this benchmark measures the hooks on a GPU")
    runs = {impl: _run_worker(impl, args) for impl in ("tornasole", "smdebug")}
    device = torch.cuda.get_device_name(0)
    print(f"{device}, torch {torch.__version__}; {args.steps} steps, best of {args.repeats}")
    head = ("model", "interval", "saves", "no hook ms", "tornasole", "smdebug", "ratio")
    print("{:>10} {:>8} {:>24} {:>11} {:>10} {:>10} {:>6}".format(*head))
    for name, interval, colls in CONFIGS:
        key = _key(name, interval, colls)
        if key not in runs["tornasole"]:
            continue
        slow = {impl: runs[impl][key]["hook"] / runs[impl][key]["base"] - 1.0 for impl in runs}
        base_ms = runs["tornasole"][key]["base"] / args.steps * 1e3
        ratio = slow["tornasole"] / slow["smdebug"] if slow["smdebug"] > 0 else float("nan")
        saves = "losses" + (f" + {colls.replace(',', ', ')}" if colls else "")
        print(
            f"{name:>10} {interval:>8} {saves:>24} {base_ms:>11.3f} "
            f"{slow['tornasole']:>+10.1%} {slow['smdebug']:>+10.1%} {ratio:>6.2f}"
        )


if __name__ == "__main__":
    main()

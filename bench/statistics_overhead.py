"""Statistics every step on a small transformer LM: what the PyTorch hook's statistics mode costs.

A causal transformer LM (2 blocks, d=128, 4 heads, vocabulary 512, sequence
64, batch 16; 0.5 M parameters in 29 tensors) trains with AdamW. Rows:

- ``tornasole stats``: ``Hook(statistics=True)``: norm, max_abs, mean, std,
  zero_fraction and nonfinite_count of every parameter and gradient, the loss,
  the learning rate and the total norms, every step (352 values a step);
- ``tornasole llm``: ``Hook(preset="llm")`` (norms, loss, learning rate);
- ``smdebug``: smdebug 1.0.34's hook saving the same reductions that it has
  (``l2``, ``abs_max``, ``mean``, ``std``: not zero_fraction and
  nonfinite_count) of weights, biases and gradients, and the loss, every step
  (in its own venv, ``.venv-smdebug``, through a subprocess of this file).

Each row is timed against the same loop without a hook, alternating, over
``--repeats`` pairs; printed are the fastest run of each and the median of the
pairs' own slowdowns, in wall time and in process CPU time (all threads: the
writer thread's encoding and file writes are counted). ``hook.close()`` is
inside the timing. On CUDA (``--device cuda``; ``make bench-cuda``) the device
is synchronised at both ends, and the smdebug row runs only where its venv
has a CUDA torch (``--smdebug-path`` as in ``bench/hook_overhead_cuda.py``).

``--breakdown stats`` (or ``llm``) instead times where a hooked step's CPU goes, in each thread's own
CPU time (``time.thread_time``, steady on a busy machine where wall times are not): the reductions
(``TensorStatistics.cpu_statistics``, a CPU step's one call of the compiled loop, or
``TensorStatistics.parts``, inside ``StepStatistics.collect``), the step's assembly into records
(``Hook._stats_finish_step``) on the training thread, and the writer thread's encoding
(``StepWriter.add_tensors``, ``StepWriter.add_scalar_block``) and file writes
(``TrialWriter.write_step``); medians and means over the steps after the 5 warm-up steps (the means
count the steps that make the next event directories in one burst), and the means' sum as a share of
the no-hook step.

Usage::

    .venv/bin/python bench/statistics_overhead.py [--device cpu] [--steps 60] [--repeats 5] [--threads 1]
    .venv/bin/python bench/statistics_overhead.py --breakdown stats --steps 40
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SMDEBUG_PYTHON = REPO / ".venv-smdebug" / "bin" / "python"


def _model(device: str):
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x, mask):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    class LM(nn.Module):
        def __init__(self, vocab: int = 512, d: int = 128, heads: int = 4, blocks: int = 2, seq: int = 64):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(blocks))
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab)
            self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1))

        def forward(self, tokens):
            x = self.embed(tokens)
            for block in self.blocks:
                x = block(x, self.mask)
            return self.head(self.ln_f(x))

    torch.manual_seed(0)
    model = LM().to(device)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 512, (16, 65), generator=g).to(device)
    return model, tokens[:, :-1], tokens[:, 1:]


def _hook(kind: str, out: str):
    if kind == "smdebug":
        import smdebug.pytorch as smd

        hook = smd.Hook(
            out_dir=out,
            save_config=smd.SaveConfig(save_interval=1),
            reduction_config=smd.ReductionConfig(
                reductions=["mean", "std"], abs_reductions=["max"], norms=["l2"], save_raw_tensor=False
            ),
            include_collections=["weights", "biases", "gradients", "losses"],
        )
        return hook, False
    import tornasole.pytorch as ts

    if kind == "stats":
        return ts.Hook(out, statistics=True), True
    return ts.Hook(out, preset="llm"), True


def _run(kind: str | None, steps: int, device: str, after_warmup=None) -> tuple[float, float]:
    import torch
    from torch import nn

    model, x, y = _model(device)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    out = tempfile.mkdtemp(prefix="bench-stats-")
    shutil.rmtree(out)
    hook = None
    if kind is not None:
        hook, takes_optimizer = _hook(kind, out)
        hook.register_module(model)
        hook.register_loss(loss_fn)
        if takes_optimizer:
            hook.register_optimizer(opt)

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(x).flatten(0, 1), y.flatten()).backward()
        opt.step()

    for _ in range(5):
        step()  # warm-up (allocator, first calls), untimed
    if after_warmup is not None:
        after_warmup()
    if device == "cuda":
        torch.cuda.synchronize()
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    if hook is not None:
        hook.close()
    if device == "cuda":
        torch.cuda.synchronize()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    shutil.rmtree(out, ignore_errors=True)
    return wall, cpu


def worker(kinds: list[str], steps: int, repeats: int, device: str, threads: int) -> dict[str, dict]:
    import torch

    torch.set_num_threads(threads)
    results = {}
    for kind in kinds:
        base, hooked = [], []
        for r in range(repeats):
            pair = [None, kind] if r % 2 else [kind, None]  # alternate which goes first
            for k in pair:
                (hooked if k else base).append(_run(k, steps, device))
        results[kind] = {"base": base, "hook": hooked}
    return results


def breakdown(kind: str, steps: int, device: str, threads: int) -> None:
    """Print the median thread CPU time a step spends in each phase of the hook (see the docstring)."""
    import torch

    from tornasole.format import writer
    from tornasole.pytorch import hook, step_statistics
    from tornasole.pytorch import statistics as stats_mode

    torch.set_num_threads(threads)
    phases = [
        ("reductions (TensorStatistics.parts)", stats_mode.TensorStatistics, "parts"),
        ("one C call (TensorStatistics.cpu_statistics)", stats_mode.TensorStatistics, "cpu_statistics"),
        ("collect (reductions, totals, finish)", step_statistics.StepStatistics, "collect"),
        ("assembly into records (_stats_finish_step)", hook.Hook, "_stats_finish_step"),
        ("writer: encoding (add_tensors)", writer.StepWriter, "add_tensors"),
        ("writer: encoding (add_scalar_block)", writer.StepWriter, "add_scalar_block"),
        ("writer: files (write_step)", writer.TrialWriter, "write_step"),
    ]
    times: dict[str, list[float]] = {label: [] for label, _, _ in phases}

    def timed(label: str, f):
        def wrapper(*args, **kwargs):
            start = time.thread_time()
            try:
                return f(*args, **kwargs)
            finally:
                times[label].append(time.thread_time() - start)

        return wrapper

    for label, owner, name in phases:
        if hasattr(owner, name):  # (an older tree, measured for comparison, lacks the newer phases)
            setattr(owner, name, timed(label, getattr(owner, name)))

    def steady() -> None:  # the warm-up steps' one-off work (the first layout, directories) is not counted
        for values in times.values():
            values.clear()

    _run(kind, steps, device, after_warmup=steady)
    base = [_run(None, steps, device)[1] for _ in range(2)]
    base_ms = min(base) / steps * 1e3
    print(f"{kind}: thread CPU per step over {steps} steps (no-hook step: {base_ms:.2f} ms), median and mean")
    for label, values in times.items():
        if values:
            median, mean = statistics.median(values) * 1e3, statistics.mean(values) * 1e3
            print(f"  {label:46s} {median:7.3f} ms {mean:7.3f} ms  x{len(values)}")
    # the phases that do not contain one another, summed per saved step (means: bursts included)
    top = [label for label, _, name in phases if name not in ("parts", "cpu_statistics")]
    saved = len(times["collect (reductions, totals, finish)"]) or 1
    total = sum(sum(times[label]) for label in top) / saved * 1e3
    share = total / base_ms
    print(f"  {'hook work a step, all threads (means)':46s} {total:7.3f} ms = {share:.2%} of the step")


def _summary(runs: dict, steps: int) -> list[str]:
    rows = []
    for kind, r in runs.items():
        for label, i in (("wall", 0), ("cpu", 1)):
            base = [t[i] for t in r["base"]]
            hook = [t[i] for t in r["hook"]]
            best = min(hook) / min(base) - 1.0
            paired = statistics.median(h / b - 1.0 for h, b in zip(hook, base))
            rows.append(
                f"{kind:>16} {label:>5} {min(base) / steps * 1e3:>10.2f} {min(hook) / steps * 1e3:>10.2f}"
                f" {best:>+9.1%} {paired:>+12.1%}"
            )
    return rows


def _ahead_of_pythonpath(first: str) -> str:
    """``first``, then the caller's PYTHONPATH: where the library's dependencies travel in a ``pip --target``
    folder on PYTHONPATH (google-crc32c and protobuf on the CUDA machine, bench/README.md), our worker keeps
    them. An empty entry would put the working directory on the path: only non-empty ones are joined."""
    return os.pathsep.join(p for p in (first, os.environ.get("PYTHONPATH", "")) if p)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument(
        "--smdebug-path", default=None, help="run smdebug from this directory with this interpreter"
    )
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--breakdown", choices=["stats", "llm"], help="time the hook's phases instead")
    args = ap.parse_args()
    if args.breakdown:
        breakdown(args.breakdown, args.steps, args.device, args.threads)
        return
    if args.worker:
        kinds = args.worker.split(",")
        print(json.dumps(worker(kinds, args.steps, args.repeats, args.device, args.threads)))
        return
    common = ["--steps", str(args.steps), "--repeats", str(args.repeats), "--device", args.device]
    common += ["--threads", str(args.threads)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    ours_env = dict(os.environ, PYTHONPATH=_ahead_of_pythonpath(str(REPO / "layers")))
    runs: dict[str, dict] = {}
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", "stats,llm", *common],
        capture_output=True,
        text=True,
        env=ours_env,
    )
    if proc.returncode:
        sys.exit(f"tornasole worker failed:\n{proc.stderr[-3000:]}")
    runs.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    python = sys.executable if args.smdebug_path else str(SMDEBUG_PYTHON)
    if args.smdebug_path:
        env["PYTHONPATH"] = args.smdebug_path
    if args.smdebug_path or SMDEBUG_PYTHON.exists():
        proc = subprocess.run(
            [python, __file__, "--worker", "smdebug", *common],
            capture_output=True,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),
        )
        if proc.returncode:
            print(f"smdebug row skipped: its worker failed:\n{proc.stderr[-1500:]}")
        else:
            runs.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(
        f"transformer LM (2 blocks, d=128, seq 64, batch 16), AdamW, {args.device}, {args.threads} thread(s),"
        " "
        f"{args.steps} steps, {args.repeats} pairs; statistics every step"
    )
    print(f"{'row':>16} {'time':>5} {'base ms':>10} {'hook ms':>10} {'best':>9} {'paired med':>12}")
    for row in _summary(runs, args.steps):
        print(row)


if __name__ == "__main__":
    main()

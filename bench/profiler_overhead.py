"""What the profiler costs: the system sampler against training CPU, step timing against step time.

Two measurements on a small PyTorch loop (a 3-layer MLP, width ``--width``, batch 64, CPU, one torch
thread), the issue's targets beside them:

1. **Sampler** (target <= 0.5 % of training CPU at 500 ms): training runs ``--seconds`` with the profiler
   on; the profiler thread's own CPU time (``time.thread_time`` around each sample, file writes
   included) is divided by the CPU time the rest of the process used in the same run.
2. **Step timing** (target <= 1 % of step time): the same loop with the hook alone and with the hook plus
   framework metrics (system sampler off, to isolate the training thread's cost), alternated
   ``--repeats`` times in one process; the fastest run of each is kept (the machine is shared: the
   minimum is the least noisy estimate of the code's cost), in process CPU time and wall time.

smdebug's profiler is not measured beside it: its framework profiler needs smdebug's PyTorch hook and the
smdebug venv (``.venv-smdebug``) has no torch; its system metrics come from SageMaker's closed daemon, not
from smdebug. The script says so in its output.

Usage::

    .venv/bin/python bench/profiler_overhead.py [--seconds 20] [--steps 1500] [--repeats 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import torch
from torch import nn

import tornasole.pytorch as ts
from tornasole.profiler.sampling import recorder
from tornasole.profiler.sampling.config import ProfilerConfig


def _model(width: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1)
    )
    return model, torch.optim.SGD(model.parameters(), lr=1e-3)


def _loop(hook: ts.Hook | None, steps: int, width: int) -> tuple[float, float]:
    """Wall and process CPU seconds of ``steps`` training steps (``hook.close()`` included)."""
    model, opt = _model(width)
    if hook is not None:
        hook.register_module(model)
        hook.register_optimizer(opt)
    x, y = torch.randn(64, 64), torch.randn(64, 1)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if hook is not None:
        hook.close()
    return time.perf_counter() - wall, time.process_time() - cpu


class _ThreadCpu:
    """Adds up the profiler thread's CPU time spent in each sample (``Profiler._tick``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.samples = 0
        self._original = recorder.Profiler._tick
        meter = self

        def timed_tick(profiler: recorder.Profiler) -> None:
            start = time.thread_time()
            try:
                meter._original(profiler)
            finally:
                if threading.current_thread().name == "tornasole-profiler":
                    meter.seconds += time.thread_time() - start
                    meter.samples += 1

        recorder.Profiler._tick = timed_tick

    def restore(self) -> None:
        recorder.Profiler._tick = self._original


def sampler_share(seconds: float, width: int, interval_ms: int) -> dict[str, float]:
    meter = _ThreadCpu()
    out = Path(tempfile.mkdtemp(prefix="prof-bench-"))
    try:
        config = ProfilerConfig(interval_ms=interval_ms, framework_metrics=False)
        hook = ts.Hook(str(out), profiler=config)
        model, opt = _model(width)
        hook.register_module(model)
        x, y = torch.randn(64, 64), torch.randn(64, 1)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        while time.perf_counter() - wall0 < seconds:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        hook.close()
        cpu = time.process_time() - cpu0
    finally:
        meter.restore()
        shutil.rmtree(out, ignore_errors=True)
    training = cpu - meter.seconds
    return {
        "samples": meter.samples,
        "sampler_ms_per_sample": 1000 * meter.seconds / max(meter.samples, 1),
        "sampler_cpu_s": meter.seconds,
        "training_cpu_s": training,
        "share_pct": 100 * meter.seconds / training,
    }


def step_timing_cost(steps: int, repeats: int, width: int) -> dict[str, float]:
    out = Path(tempfile.mkdtemp(prefix="prof-bench-"))
    plain: list[tuple[float, float]] = []
    timed: list[tuple[float, float]] = []
    try:
        _loop(None, 200, width)  # warm-up
        for i in range(repeats):
            plain.append(_loop(ts.Hook(str(out / f"p{i}"), profiler=False), steps, width))
            config = ProfilerConfig(system_metrics=False, dataloader=False)
            hook = ts.Hook(str(out / f"t{i}"), profiler=config)
            timed.append(_loop(hook, steps, width))
            assert hook.profiler_recorder is not None
            assert not hook.profiler_recorder.events_dropped
    finally:
        shutil.rmtree(out, ignore_errors=True)
    best = {
        name: (min(w for w, _ in runs), min(c for _, c in runs))
        for name, runs in (("plain", plain), ("timed", timed))
    }
    step_us = 1e6 * best["plain"][0] / steps
    return {
        "step_us": step_us,
        "wall_pct": 100 * (best["timed"][0] / best["plain"][0] - 1),
        "cpu_pct": 100 * (best["timed"][1] / best["plain"][1] - 1),
        "added_us_per_step": 1e6 * (best["timed"][1] - best["plain"][1]) / steps,
        "spread_pct": 100 * statistics.pstdev(w for w, _ in plain) / statistics.mean(w for w, _ in plain),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--interval-ms", type=int, default=500)
    args = parser.parse_args()
    torch.set_num_threads(1)
    sampler = sampler_share(args.seconds, args.width, args.interval_ms)
    print(
        f"sampler at {args.interval_ms} ms: {sampler['samples']} samples, "
        f"{sampler['sampler_ms_per_sample']:.3f} ms CPU each; {sampler['sampler_cpu_s']:.3f} s of "
        f"{sampler['training_cpu_s']:.2f} s training CPU = {sampler['share_pct']:.3f} % (target <= 0.5 %)"
    )
    cost = step_timing_cost(args.steps, args.repeats, args.width)
    print(
        f"step timing: {cost['step_us']:.0f} us a step; +{cost['added_us_per_step']:.1f} us CPU a step = "
        f"{cost['cpu_pct']:+.2f} % CPU, {cost['wall_pct']:+.2f} % wall (target <= 1 %; run-to-run spread "
        f"{cost['spread_pct']:.1f} %)"
    )
    print(
        "smdebug's profiler: not measured (.venv-smdebug has no torch for its PyTorch hook's profiler; "
        "its system metrics come from SageMaker's daemon, not from smdebug)"
    )


if __name__ == "__main__":
    main()

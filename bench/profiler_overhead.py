"""What the profiler costs: the system sampler against training CPU, step timing against step time.

Two measurements on a small PyTorch loop (a 3-layer MLP, width ``--width``, batch 64, CPU, one torch
thread), the issue's targets beside them:

1. **Sampler** (target <= 0.5 % of training CPU at 500 ms): training runs ``--seconds`` with the profiler
   on; the profiler thread's own CPU time (``time.thread_time`` around each sample, file writes
   included) is divided by the CPU time the rest of the process used in the same run.
2. **Step timing** (target <= 1 % of step time): the same loop with the hook alone and with the hook plus
   framework metrics (system sampler off, to isolate the training thread's cost), alternated
   ``--repeats`` times in one process; the fastest run of each is kept (the machine is shared: the
   minimum is the least noisy estimate of the code's cost), in the training thread's CPU time and in
   wall time. On a shared 2-core machine that A/B difference is within its own noise, so the script
   also measures the cost directly: the time spent inside every profiler callback on the training
   thread (step boundaries, the forward hook, the gradient hook, the optimizer's pre/post hooks), in
   the thread's CPU time (the clock reads' own cost included: an over-estimate; PyTorch's dispatch to
   the extra hooks is not in it), as a share of a step's wall time and of the training thread's CPU
   time a step (the one a loaded machine does not inflate).

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
    """Wall seconds of ``steps`` training steps and the training thread's CPU seconds in them.

    ``hook.close()`` is outside: it drains the writer and profiler threads, whose work (encoding and
    writing files, off the training thread) is not step time; the sampler's share is measured apart.
    """
    model, opt = _model(width)
    if hook is not None:
        hook.register_module(model)
        if hook.profiler_config is not None:  # outside statistics mode, only profiling registers one
            hook.register_optimizer(opt)
    x, y = torch.randn(64, 64), torch.randn(64, 1)
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(steps):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    result = time.perf_counter() - wall, time.thread_time() - cpu
    if hook is not None:
        hook.close()
    return result


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


class _CallbackClock:
    """Adds up the CPU time the training thread spends inside the profiler's callbacks.

    CPU time (``thread_time_ns``), not wall time: a callback's wall time also holds the moments another
    thread (the tensor writer, the profiler's own) had the GIL, and whatever else the machine ran.
    """

    PROFILER_CALLBACKS = ("forward_end", "backward_end", "before", "after")

    def __init__(self) -> None:
        from tornasole.hooks.profiling import HookProfiling
        from tornasole.pytorch import hook as torch_hook

        self.ns = 0
        self.calls = 0
        self.depth = 0  # a callback inside a timed one (_OutsideGraphCallback calls _Callback's) counts once
        self._patched: list[tuple[object, str, object]] = []
        clock = self

        def timed(original, always: bool):
            def wrapper(this, *args):
                if clock.depth or (
                    not always and getattr(this.fn, "__name__", "") not in clock.PROFILER_CALLBACKS
                ):
                    return original(this, *args)
                clock.depth += 1
                start = time.thread_time_ns()
                try:
                    return original(this, *args)
                finally:
                    clock.ns += time.thread_time_ns() - start
                    clock.calls += 1
                    clock.depth -= 1

            return wrapper

        for owner, name, always in (
            (torch_hook._Callback, "__call__", False),
            (torch_hook._OutsideGraphCallback, "__call__", False),
            (HookProfiling, "_profile_step_begin", True),
        ):
            original = owner.__dict__[name]
            self._patched.append((owner, name, original))
            setattr(owner, name, timed(original, always))

    def restore(self) -> None:
        for owner, name, original in reversed(self._patched):
            setattr(owner, name, original)


def callback_cost(steps: int, width: int) -> dict[str, float]:
    out = Path(tempfile.mkdtemp(prefix="prof-bench-"))
    clock = _CallbackClock()
    try:
        config = ProfilerConfig(system_metrics=False, dataloader=False)
        wall, cpu = _loop(ts.Hook(str(out), profiler=config), steps, width)
    finally:
        clock.restore()
        shutil.rmtree(out, ignore_errors=True)
    per_step_us = clock.ns / 1000 / steps
    # the two clock reads around each call, measured the same way, are the clock's, not the profiler's
    reads = 20_000
    start = time.thread_time_ns()
    for _ in range(reads):
        time.thread_time_ns()
    clock_us = 2 * (time.thread_time_ns() - start) / reads / 1000
    net_us = max(per_step_us - clock_us * clock.calls / steps, 0.0)
    step_us = 1e6 * wall / steps
    # Also against the training thread's own CPU a step: on a shared machine a step's wall time holds
    # the time other processes ran, which the callbacks' CPU time does not, so the wall share shrinks
    # as the load grows; the CPU share does not.
    cpu_step_us = 1e6 * cpu / steps
    return {
        "calls_per_step": clock.calls / steps,
        "us_per_step": per_step_us,
        "net_us_per_step": net_us,
        "step_us": step_us,
        "pct": 100 * per_step_us / step_us,
        "net_pct": 100 * net_us / step_us,
        "cpu_step_us": cpu_step_us,
        "net_cpu_pct": 100 * net_us / cpu_step_us,
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
        f"step timing: {cost['step_us']:.0f} us a step; {cost['added_us_per_step']:+.1f} us CPU a step = "
        f"{cost['cpu_pct']:+.2f} % training-thread CPU, {cost['wall_pct']:+.2f} % wall (target <= 1 %; "
        f"run-to-run spread {cost['spread_pct']:.1f} %)"
    )
    direct = callback_cost(args.steps, args.width)
    print(
        f"step timing, measured inside its callbacks: {direct['calls_per_step']:.0f} calls, "
        f"{direct['us_per_step']:.1f} us a step = {direct['pct']:.2f} % of step time "
        f"({direct['step_us']:.0f} us wall); less the clock's own reads {direct['net_us_per_step']:.1f} us "
        f"= {direct['net_pct']:.2f} % of wall, {direct['net_cpu_pct']:.2f} % of the training thread's "
        f"{direct['cpu_step_us']:.0f} us CPU a step (target <= 1 %)"
    )
    print(
        "smdebug's profiler: not measured (.venv-smdebug has no torch for its PyTorch hook's profiler; "
        "its system metrics come from SageMaker's daemon, not from smdebug)"
    )


if __name__ == "__main__":
    main()

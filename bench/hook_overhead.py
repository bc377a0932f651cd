"""How much a hook slows training: no hook vs Tornasole's hook vs smdebug 1.0.34's hook.

A 3-layer MLP (batch 64, CPU, one torch thread) is trained for ``--steps``
steps with no hook, then with a hook saving the default collections (the loss;
``--collections`` adds more) every 1, 10 and 100 steps. Each configuration is
timed ``--repeats`` times, alternating with its own no-hook baseline in the
same process, and the fastest run of each is kept (the machine is shared: the
minimum is the least noisy estimate of what the code itself costs); the time
includes ``hook.close()``, so our background writer's draining is counted. smdebug runs in its own venv
(``.venv-smdebug``) through a subprocess of this same file.

Usage::

    .venv/bin/python bench/hook_overhead.py [--steps 400] [--repeats 6] [--collections weights,gradients]

Prints, per save interval, each hook's slowdown against no hook and the ratio
of our overhead to smdebug's (targets: < 3 % at interval 100; ratio <= 0.5),
both in wall time and in process CPU time (all threads: our writer thread's
work is counted). On a busy machine the CPU-time table is the steadier one.

Keras and XGBoost rows (``--frameworks keras,keras_mnist,xgboost,xgboost_large``;
tornasole only: smdebug 1.0.34 runs neither Keras 3 nor XGBoost 3): ``model.fit``
saving losses, metrics, weights and gradients, and ``xgboost.train`` saving
metrics and feature importances, each against the same run without a hook
(both after an untimed warm-up that traces the step function). Each framework
has two sizes. The small ones (a dense 32-64-1 model at batch 32, 0.5 ms a
step; depth-4 trees on 2000x10, 0.4 ms a round) are where a saved step's fixed
cost (about 1 ms: reading the tensors, encoding them, two files) weighs most.
The large ones have step times of real jobs: keras.io's MNIST convnet example
at batch 128 (~12 ms a step on 2 cores, synthetic images) and
depth-6 trees on 100,000x20 (~7 ms a round); they run ``--large`` steps and
repeats (default 200 and 6). Hooked and unhooked runs alternate
(which goes first alternates too), ``--repeats`` of each (default 10); printed
are the minimum of each and the median of each pair's own slowdown (a hooked
run against the unhooked run beside it: single runs vary by tens of ms either
way on a shared VM, which moves a minimum's ratio, not the paired median), in
wall time and in process CPU time (all threads, the writer thread included).
Also printed: the hook's CPU time (the training
thread's CPU time inside the hook's callbacks, less what the timer itself
counts around an empty callback, ~1 us a call: for XGBoost around an empty
callback inside ``xgboost.train``, where caches are cold, ~1.5-2 us; plus the
writer thread's), as a
share of the no-hook run and per saved step, the hook's own time on
a step that saves nothing (its callbacks called directly, µs; target < 20 µs)
and the load average before and after (the machine may be shared). XGBoost
also gets a long run at interval 100 (``--long-rounds``, default 2000; 0 for
none): the short run's four saves carry the one-time costs and a model of at
most 400 trees, while a saved round's feature importances walk every tree, so
the long run is the one that shows the cost per saved round of a long job.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SMDEBUG_PYTHON = REPO / ".venv-smdebug" / "bin" / "python"
INTERVALS = (1, 10, 100)
LONG_INTERVAL = 100


def sgd_steps(model, loss_fn, opt, x, y, n: int) -> None:
    """``n`` plain training steps on one batch: what every torch row times (here and on the GPU)."""
    for _ in range(n):
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()


def _train(steps: int, hook_factory, seed: int = 0) -> tuple[float, float]:
    """(wall seconds, process CPU seconds, all threads) for ``steps`` training steps plus ``close()``."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 128), torch.randint(0, 10, (64,))
    hook = hook_factory() if hook_factory else None
    if hook is not None:
        hook.register_module(model)
        hook.register_loss(loss_fn)
    sgd_steps(model, loss_fn, opt, x, y, 20)  # warm-up, untimed (allocator, first-call paths)
    start, cpu_start = time.perf_counter(), time.process_time()
    sgd_steps(model, loss_fn, opt, x, y, steps)
    if hook is not None:
        hook.close()
    return time.perf_counter() - start, time.process_time() - cpu_start


def _factory(impl: str, out_dir: str, interval: int, collections: list[str]):
    if impl == "tornasole":
        import tornasole.pytorch as lib
    else:
        import smdebug.pytorch as lib

    def make():
        kwargs = {"include_collections": collections} if collections else {}
        return lib.Hook(out_dir=out_dir, save_config=lib.SaveConfig(save_interval=interval), **kwargs)

    return make


def worker(impl: str, steps: int, repeats: int, collections: list[str]) -> dict[str, dict[str, float]]:
    """Run in the venv of ``impl``: median no-hook and hooked times per interval."""
    import torch

    torch.set_num_threads(1)
    results: dict[str, dict[str, float]] = {}
    for interval in INTERVALS:
        base, hooked = [], []
        for r in range(repeats):
            if r % 2:  # alternate which goes first, so drifts in machine load do not favour either
                base.append(_train(steps, None))
            out = tempfile.mkdtemp(prefix=f"bench-{impl}-{interval}-{r}-")
            shutil.rmtree(out)  # smdebug wants a fresh directory
            try:
                hooked.append(_train(steps, _factory(impl, out, interval, collections)))
            finally:
                shutil.rmtree(out, ignore_errors=True)
            if not r % 2:
                base.append(_train(steps, None))
        results[str(interval)] = {
            "base": min(w for w, _ in base),
            "hook": min(w for w, _ in hooked),
            "base_cpu": min(c for _, c in base),
            "hook_cpu": min(c for _, c in hooked),
        }
    return results


_KERAS_CALLBACKS = ("on_train_begin", "on_train_batch_begin", "on_train_batch_end", "on_train_end", "close")
_XGBOOST_CALLBACKS = ("after_iteration", "after_training", "close")
_WRITER_CPU = [0.0]  # CPU seconds the writer thread spent handling items (all runs of this process)


def _clock_writer_thread() -> None:
    """Count the CPU time of the hook's writer thread (thread_time around each item it handles)."""
    from tornasole.hooks.uploader import AsyncTrialWriter

    handle = AsyncTrialWriter._handle

    def timed(self, item):
        start = time.thread_time()
        try:
            return handle(self, item)
        finally:
            _WRITER_CPU[0] += time.thread_time() - start

    AsyncTrialWriter._handle = timed


def _clock_callbacks(hook, names: tuple[str, ...]) -> list[float]:
    """Count the training thread's CPU time inside the hook's callbacks; returns the running total and
    the number of calls (``[seconds, calls]``: the timer's own cost is taken off per call)."""
    spent = [0.0, 0]
    for name in names:
        method = getattr(hook, name)

        def timed(*args, _method=method, **kwargs):
            start = time.thread_time()
            try:
                return _method(*args, **kwargs)
            finally:
                spent[0] += time.thread_time() - start
                spent[1] += 1

        setattr(hook, name, timed)
    return spent


_TIMER_S = [0.0]  # what _clock_callbacks counts around a callback that does nothing, per call


def _calibrate_timer(n: int = 20000, rounds: int = 5) -> float:
    """The CPU time ``_clock_callbacks`` counts around an empty callback (its two clock reads and the
    call through the wrapper, ~1 us on a VM): counted on every round, so taken off every call's time
    (the fewest of ``rounds`` tries, like every other figure here)."""

    class Empty:
        def after_iteration(self, model, epoch, evals_log):
            return False

    tries = []
    for _ in range(rounds):
        empty = Empty()
        spent = _clock_callbacks(empty, ("after_iteration",))
        for i in range(n):
            empty.after_iteration(None, i, None)
        tries.append(spent[0] / spent[1])
    _TIMER_S[0] = min(tries)
    return _TIMER_S[0]


def _calibrate_timer_in_xgboost(rounds: int, tries: int = 5) -> float:
    """What the timer counts around an empty ``TrainingCallback`` inside ``xgboost.train``, per call
    (the fewest of ``tries`` trainings): measured where the hook runs, after each boosting round has
    evicted the timer's own code and data from the CPU caches, the two clock reads and the wrapper
    count ~1.5-2 us a call instead of the ~0.7 us of a hot loop. At interval 100 the 99 idle rounds'
    difference, ~0.1 ms a saved round, is the timer's and not the hook's. This also takes off one call
    of a method that does nothing (~0.1 us hot, a few tenths cold), the price of XGBoost calling any
    callback, which a user pays for the hook: an undercount of ~0.01-0.03 ms a saved round at
    interval 100."""
    import xgboost as xgb

    class Empty(xgb.callback.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            return False

    d, params = _xgboost_data()
    per_call = []
    for _ in range(tries):
        empty = Empty()
        spent = _clock_callbacks(empty, ("after_iteration",))
        xgb.train(params, d, rounds, evals=[(d, "train")], callbacks=[empty], verbose_eval=False)
        per_call.append(spent[0] / spent[1])
    _TIMER_S[0] = min(per_call)
    return _TIMER_S[0]


def _callbacks_cpu(spent: list[list[float]]) -> float:
    return sum(s[0] - s[1] * _TIMER_S[0] for s in spent)


_KERAS_MODELS = {
    # name: (description, batch size, warm-up batches)
    "keras": ("Keras fit, dense 32-64-1, batch 32", 32, 20),
    "keras_mnist": (
        "Keras fit, the MNIST convnet (conv 32, conv 64, dense 10; 34,826 weights), batch 128",
        128,
        5,
    ),
}


def _keras_model(framework: str) -> tuple[Any, Any, Any]:
    """(compiled model, input shape, targets factory) of a Keras row: the small dense model (0.5 ms a
    step, where a save's fixed cost weighs most) or keras.io's MNIST convnet example (synthetic images
    and labels)."""
    import keras
    import numpy as np

    keras.utils.set_random_seed(0)
    if framework == "keras_mnist":
        model = keras.Sequential(
            [
                keras.Input((28, 28, 1)),
                keras.layers.Conv2D(32, 3, activation="relu"),
                keras.layers.MaxPooling2D(2),
                keras.layers.Conv2D(64, 3, activation="relu"),
                keras.layers.MaxPooling2D(2),
                keras.layers.Flatten(),
                keras.layers.Dropout(0.5),
                keras.layers.Dense(10, activation="softmax"),
            ]
        )
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        return model, (28, 28, 1), lambda rng, n: rng.integers(0, 10, n)
    model = keras.Sequential(
        [keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
    return model, (32,), lambda rng, n: rng.random((n, 1), dtype=np.float32)


def _keras_run(steps: int, interval: int | None, framework: str = "keras") -> tuple[float, float, float]:
    """(wall, CPU, hook CPU) seconds of ``steps`` fit steps after a traced warm-up (hook at ``interval``)."""
    import numpy as np

    from tornasole.keras import Hook, SaveConfig

    _, batch, warm = _KERAS_MODELS[framework]
    model, shape, targets = _keras_model(framework)
    rng = np.random.default_rng(0)
    x, y = rng.random((batch * steps, *shape), dtype=np.float32), targets(rng, batch * steps)
    out = tempfile.mkdtemp(prefix="bench-keras-")
    cbs = []
    if interval is not None:
        colls = ["weights", "gradients"]
        cbs = [Hook(out, save_config=SaveConfig(save_interval=interval), include_collections=colls)]
    n_warm = batch * warm
    model.fit(x[:n_warm], y[:n_warm], batch_size=batch, verbose=0, callbacks=cbs)  # warm-up: traces the step
    for hook in cbs:
        hook.flush()
    spent = [_clock_callbacks(hook, _KERAS_CALLBACKS) for hook in cbs]
    writer_start = _WRITER_CPU[0]
    start, cpu_start = time.perf_counter(), time.process_time()
    model.fit(x, y, batch_size=batch, verbose=0, callbacks=cbs)
    for hook in cbs:
        hook.close()
    took = (
        time.perf_counter() - start,
        time.process_time() - cpu_start,
        _callbacks_cpu(spent) + _WRITER_CPU[0] - writer_start,
    )
    shutil.rmtree(out, ignore_errors=True)
    return took


_LARGE = ("keras_mnist", "xgboost_large")  # the rows of realistic step times: fewer, longer runs
_XGBOOST_SIZES = {
    # name: (description, rows, features, max_depth)
    "xgboost": ("xgboost.train, depth 4, 2000x10", 2000, 10, 4),
    "xgboost_large": ("xgboost.train, depth 6, 100000x20", 100_000, 20, 6),
}


def _xgboost_data(framework: str = "xgboost") -> tuple[Any, dict[str, Any]]:
    """The benchmark's training data (a noiseless linear target) and parameters: the small set, whose
    0.4 ms rounds make a save's fixed cost weigh most, or a 100,000-row one of a size XGBoost jobs
    commonly train on (rounds of several ms)."""
    import numpy as np
    import xgboost as xgb

    _, rows, features, depth = _XGBOOST_SIZES[framework]
    rng = np.random.default_rng(0)
    x = rng.random((rows, features))
    return xgb.DMatrix(x, label=x @ rng.random(features)), {"max_depth": depth, "nthread": 1}


def _xgboost_run(rounds: int, interval: int | None, framework: str = "xgboost") -> tuple[float, float, float]:
    import xgboost as xgb

    from tornasole.xgboost import Hook, SaveConfig

    d, params = _xgboost_data(framework)
    out = tempfile.mkdtemp(prefix="bench-xgb-")
    cbs = []
    if interval is not None:
        colls = ["metrics", "feature_importance"]
        cbs = [Hook(out, save_config=SaveConfig(save_interval=interval), include_collections=colls)]
    xgb.train(params, d, 5, evals=[(d, "train")], verbose_eval=False)  # warm-up
    spent = [_clock_callbacks(hook, _XGBOOST_CALLBACKS) for hook in cbs]
    writer_start = _WRITER_CPU[0]
    start, cpu_start = time.perf_counter(), time.process_time()
    xgb.train(params, d, rounds, evals=[(d, "train")], callbacks=cbs, verbose_eval=False)
    for hook in cbs:
        hook.close()
    took = (
        time.perf_counter() - start,
        time.process_time() - cpu_start,
        _callbacks_cpu(spent) + _WRITER_CPU[0] - writer_start,
    )
    shutil.rmtree(out, ignore_errors=True)
    return took


def _idle_step_us(framework: str, n: int = 20000) -> float:
    """The hook's own time (µs) on a step that saves nothing: its per-step callbacks called directly."""
    out = tempfile.mkdtemp(prefix="bench-idle-")
    if framework == "keras":
        from tornasole.keras import Hook, SaveConfig

        hook = Hook(out, save_config=SaveConfig(save_interval=10**9, start_step=1))
        logs = {"loss": 0.5, "mae": 0.1}
        start = time.perf_counter()
        for i in range(n):
            hook.on_train_batch_begin(i)
            hook.on_train_batch_end(i, logs)
    else:
        from tornasole.xgboost import Hook, SaveConfig

        hook = Hook(out, save_config=SaveConfig(save_interval=10**9, start_step=1))
        evals_log = {"train": {"rmse": [0.5]}}
        start = time.perf_counter()
        for i in range(n):
            hook.after_iteration(None, i, evals_log)
    took = (time.perf_counter() - start) / n * 1e6
    hook.close()
    shutil.rmtree(out, ignore_errors=True)
    return took


def framework_worker(
    framework: str, steps: int, repeats: int, long_rounds: int = 0
) -> dict[str, dict[str, float]]:
    """Minimum no-hook and hooked (wall, CPU) times per interval, plus the idle-step hook time."""
    if framework.startswith("keras"):
        run = functools.partial(_keras_run, framework=framework)
    else:
        run = functools.partial(_xgboost_run, framework=framework)
    _clock_writer_thread()
    timer_hot = _calibrate_timer()
    if framework.startswith("xgboost"):
        _calibrate_timer_in_xgboost(steps)
    results: dict[str, dict[str, float]] = {}
    for interval in INTERVALS:
        results[str(interval)] = _alternating(run, steps, interval, repeats)
    if framework == "xgboost" and long_rounds:
        long = _alternating(run, long_rounds, LONG_INTERVAL, max(3, repeats // 3))
        results["long"] = {"rounds": long_rounds, **long}
    results["idle_us"] = {"value": _idle_step_us("keras" if framework.startswith("keras") else "xgboost")}
    results["timer_us"] = {"value": _TIMER_S[0] * 1e6, "hot": timer_hot * 1e6}
    return results


def _alternating(run, steps: int, interval: int, repeats: int) -> dict[str, float]:
    """``repeats`` pairs of runs, unhooked and hooked, alternating which goes first: the minimum of
    each (what the code costs when nothing else interferes) and the median of the pairs' own
    slowdowns (each hooked run against the unhooked run beside it). On a shared 2-core VM single
    runs of ~0.25 s vary by tens of ms either way (measured: pairs differing by -119 to +59 ms where
    the median difference was 5 ms), so one lucky unhooked run moves the minimum's ratio by a point
    or two; the paired median is not moved by a few such runs. Both are printed."""
    base, hooked = [], []
    for r in range(repeats):
        pair = [(base, None), (hooked, interval)]
        for bucket, arg in pair if r % 2 else pair[::-1]:
            bucket.append(run(steps, arg))
    return {
        "base": min(r[0] for r in base),
        "hook": min(r[0] for r in hooked),
        "base_cpu": min(r[1] for r in base),
        "hook_cpu": min(r[1] for r in hooked),
        "own_cpu": min(r[2] for r in hooked),
        "wall_paired": statistics.median(h[0] / b[0] - 1.0 for b, h in zip(base, hooked)),
        "cpu_paired": statistics.median(h[1] / b[1] - 1.0 for b, h in zip(base, hooked)),
    }


def _saved_steps(framework: str, steps: int, interval: int) -> int:
    """Saved steps inside the timed run (the warm-up fit's 20 Keras steps come first; rounds start at 0)."""
    first = _KERAS_MODELS[framework][2] if framework in _KERAS_MODELS else 0
    return len(range(-first % interval + first, first + steps, interval))


def file_creation_cost(steps: int = 200) -> float:
    """CPU microseconds (thread time) of one saved step's files, written the way the hook's writer
    writes them but without the hook: the event file and the index file of a new step directory,
    each through ``LocalStorage.write_atomic`` (the directory made, a temporary name written, then
    renamed), in a fresh directory under ``tempfile.gettempdir()``, where the runs write. On this
    kind of VM these system calls cost from ~50 us to over 1 ms a step depending on the directory's
    state (an ext4 /tmp that held ~30 GB of leftovers was 20-40x slower than another directory of
    the same disk), and the writer thread's share of the hook CPU follows them, so the figure is
    printed beside the rows."""
    from tornasole.storage import LocalStorage

    storage = LocalStorage()
    root = tempfile.mkdtemp(prefix="bench-fs-")
    payload = b"x" * 4096
    spent = 0.0
    try:
        for step in range(steps):
            event = os.path.join(root, "events", f"{step:012d}", "event")
            index = os.path.join(root, "index", f"{step:012d}.json")
            start = time.thread_time()
            storage.write_atomic(event, payload)
            storage.write_atomic(index, payload)
            spent += time.thread_time() - start
    finally:
        storage.close()
        shutil.rmtree(root, ignore_errors=True)
    return spent / steps * 1e6


def _framework_rows(
    frameworks: list[str], steps: int, repeats: int, long_rounds: int = 0, large: tuple[int, int] = (200, 6)
) -> None:
    print(
        f"-- file system under {tempfile.gettempdir()} (where the runs write; TMPDIR moves it):"
        f" a saved step's two files, its new directory included, {file_creation_cost():.0f} us of CPU"
        " (LocalStorage.write_atomic)"
    )
    for fw in frameworks:
        n_steps, n_repeats = large if fw in _LARGE else (steps, repeats)
        load_before = os.getloadavg()
        cmd = [sys.executable, __file__, "--worker", fw, "--steps", str(n_steps), "--repeats", str(n_repeats)]
        cmd += ["--long-rounds", str(long_rounds)]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tempfile.gettempdir())
        if proc.returncode != 0:
            sys.exit(f"{fw} worker failed:\n{proc.stderr[-3000:]}")
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        load_after = os.getloadavg()
        what = (
            f"{_KERAS_MODELS[fw][0]}, {n_steps} steps; losses, metrics, weights, grads"
            if fw in _KERAS_MODELS
            else f"{_XGBOOST_SIZES[fw][0]}, {n_steps} rounds; metrics, feature importances"
        )
        print(f"-- {what}; {n_repeats} alternating pairs of runs, tornasole vs no hook")
        print(
            f"   load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; hook CPU: thread CPU"
            f" time in the callbacks, less the timer's own {res['timer_us']['value']:.2f} us a call"
            + (
                f" (around an empty callback in xgboost.train; {res['timer_us']['hot']:.2f} us hot)"
                if fw.startswith("xgboost")
                else ""
            )
            + ", plus the writer thread's"
        )
        print("   slowdown: minimum of each (wall, CPU) and median of the pairs' own (paired wall, CPU)")
        print(
            f"{'interval':>8} {'no hook ms/step':>16} {'wall':>8} {'CPU':>8} {'paired wall':>12}"
            f" {'paired CPU':>11} {'hook CPU':>9} {'hook CPU per saved step':>24}"
        )
        for interval in INTERVALS:
            r = res[str(interval)]
            saved = max(_saved_steps(fw, n_steps, interval), 1)
            print(
                f"{interval:>8} {r['base'] / n_steps * 1e3:>16.3f} {r['hook'] / r['base'] - 1.0:>+8.1%}"
                f" {r['hook_cpu'] / r['base_cpu'] - 1.0:>+8.1%} {r['wall_paired']:>+12.1%}"
                f" {r['cpu_paired']:>+11.1%} {r['own_cpu'] / r['base_cpu']:>+9.1%}"
                f" {r['own_cpu'] / saved * 1e3:>21.2f} ms"
            )
        # One-time costs (the first save plans every tensor name, the writer thread starts, the collections
        # file and the end marker) weigh on a short run's few saves at interval 100; the interval-1 run's
        # cost per saved step is the steady state, and its share of 100 steps is a long job's overhead.
        per_save = res["1"]["own_cpu"] / n_steps
        base_step = min(res[str(i)]["base_cpu"] for i in INTERVALS) / n_steps
        print(
            f"   steady state: {per_save * 1e3:.2f} ms hook CPU per saved step"
            f" = {per_save / (100 * base_step):.1%} of 100 no-hook steps' CPU ({base_step * 1e3:.3f} ms/step)"
        )
        long = res.get("long")
        if long:
            saves = len(range(0, int(long["rounds"]), LONG_INTERVAL))
            per_save = long["own_cpu"] / saves
            base_round = long["base_cpu"] / long["rounds"]
            wall, cpu = long["hook"] / long["base"] - 1.0, long["hook_cpu"] / long["base_cpu"] - 1.0
            share = long["own_cpu"] / long["base_cpu"]
            print(
                f"   long run, {long['rounds']:.0f} rounds at interval {LONG_INTERVAL} ({saves} saves):"
                f" wall {wall:+.1%}, CPU {cpu:+.1%}"
                f" (paired {long['wall_paired']:+.1%}, {long['cpu_paired']:+.1%});"
                f" hook CPU {per_save * 1e3:.2f} ms per saved round = {share:.1%}"
                f" of the no-hook run's CPU ({base_round * 1e3:.3f} ms/round)"
            )
        print(f"   hook time on a step that saves nothing: {res['idle_us']['value']:.1f} us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=None, help="runs of each (default 6 torch, 10 others)")
    ap.add_argument("--collections", default="", help="extra collections to save, comma separated")
    ap.add_argument(
        "--frameworks",
        default="torch,keras,keras_mnist,xgboost,xgboost_large",
        help="rows to run, comma separated",
    )
    ap.add_argument(
        "--long-rounds",
        type=int,
        default=2000,
        help="XGBoost: also a run this long at interval 100 (0: none)",
    )
    workers = ("tornasole", "smdebug", *_KERAS_MODELS, *_XGBOOST_SIZES)
    ap.add_argument("--worker", choices=workers, help=argparse.SUPPRESS)
    ap.add_argument(
        "--large",
        default="200,6",
        help="keras_mnist and xgboost_large rows: steps,repeats (their steps take 10-30x the small ones')",
    )
    args = ap.parse_args()
    large_steps, large_repeats = (int(v) for v in args.large.split(","))
    large = (large_steps, large_repeats)
    colls = [c for c in args.collections.split(",") if c]
    frameworks = [f for f in args.frameworks.split(",") if f]
    fw_repeats = args.repeats or 10
    args.repeats = args.repeats or 6
    if args.worker in (*_KERAS_MODELS, *_XGBOOST_SIZES):
        print(json.dumps(framework_worker(args.worker, args.steps, fw_repeats, args.long_rounds)))
        return
    if args.worker:
        print(json.dumps(worker(args.worker, args.steps, args.repeats, colls)))
        return
    if "torch" not in frameworks:
        _framework_rows(frameworks, args.steps, fw_repeats, args.long_rounds, large)
        return
    if not SMDEBUG_PYTHON.exists():
        sys.exit(f"{SMDEBUG_PYTHON} is missing: build the smdebug venv first (make setup-smdebug)")
    runs = {}
    for impl, python in (("tornasole", sys.executable), ("smdebug", str(SMDEBUG_PYTHON))):
        cmd = [python, __file__, "--worker", impl, "--steps", str(args.steps), "--repeats", str(args.repeats)]
        if colls:
            cmd += ["--collections", ",".join(colls)]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tempfile.gettempdir())
        if proc.returncode != 0:
            sys.exit(f"{impl} worker failed:\n{proc.stderr[-3000:]}")
        runs[impl] = json.loads(proc.stdout.strip().splitlines()[-1])
    what = "default collections (losses)" + (f" + {', '.join(colls)}" if colls else "")
    print(f"3-layer MLP, batch 64, CPU, {args.steps} steps, best of {args.repeats}; {what}")
    for label, b, h in (("wall time", "base", "hook"), ("process CPU time", "base_cpu", "hook_cpu")):
        print(f"-- slowdown in {label} against no hook")
        print(
            f"{'interval':>8} {'no hook ms/step':>16} {'tornasole':>10} {'smdebug':>10} {'ours/smdebug':>13}"
        )
        for interval in INTERVALS:
            key = str(interval)
            slow = {impl: runs[impl][key][h] / runs[impl][key][b] - 1.0 for impl in runs}
            base_ms = runs["tornasole"][key][b] / args.steps * 1e3
            ratio = slow["tornasole"] / slow["smdebug"] if slow["smdebug"] > 0 else float("nan")
            ours, theirs = slow["tornasole"], slow["smdebug"]
            print(f"{interval:>8} {base_ms:>16.3f} {ours:>+10.1%} {theirs:>+10.1%} {ratio:>13.2f}")
    _framework_rows([f for f in frameworks if f != "torch"], args.steps, fw_repeats, args.long_rounds, large)


if __name__ == "__main__":
    main()

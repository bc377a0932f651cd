"""The stop signal as a training loop sees it: marker written -> ``hook.stop_requested``; cost per step.

    .venv/bin/python bench/stop_signal.py                  # 20 stops on S3 (moto server) and 20 locally
    .venv/bin/python bench/stop_signal.py --stops 5 --steps 20000   # quick

Why: a rule's ``stoptraining`` verdict is only useful if the training loop learns it
quickly, and the check must not slow the loop down. The hook polls for
``<out_dir>/tornasole_stop_training.json`` on a background thread
(``tornasole.hooks.stop_signal``); the loop reads a flag.

1. **Latency.** A ``tornasole.Hook`` with its default settings (nothing passed
   but ``out_dir``) runs a training loop: each step is a small numpy matmul
   (``--step-ms``, about 5 ms) and ``hook.next_step()``, and the loop checks
   ``hook.stop_requested`` after every step, as a training script does. At a
   random moment (0.3-1.8 s after the hook starts, so the marker lands at any
   phase of the poll) another thread writes the marker, as the evaluator does
   for a verdict: ``PutObject`` on S3, an atomic file write locally. Measured:
   PUT returned (the marker exists) -> the first step boundary at which
   ``stop_requested`` is true, and the steps run in between. S3 is a moto
   ``ThreadedMotoServer`` on 127.0.0.1 (one HEAD per check, as against S3; the
   network round trip of a real region comes on top, tens of ms).
2. **Cost per step.** The same hook's ``next_step()`` + ``stop_requested`` in a
   tight loop (no matmul, nothing saved), ``--steps`` steps, with the poller
   running at its default interval against the hook with ``stop_check_interval=None``,
   alternated ``--repeat`` times, best of each kept: the training thread's cost
   of the stop signal, the background thread's GIL time included.

Prints p50/p90/max of the latency per backend, and the per-step times and their difference.
Targets (issue #28): stop_requested within 1 s of the verdict; at most 20 us per step.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "layers"))  # run from a checkout without install

from tornasole import Hook, SaveConfig  # noqa: E402
from tornasole.format.paths import STOP_SIGNAL  # noqa: E402
from tornasole.hooks.stop_signal import DEFAULT_STOP_CHECK_INTERVAL  # noqa: E402

BUCKET = "tornasole-stop-bench"


def start_moto() -> Any:
    """A moto S3 server on loopback; the hook and the marker writer reach it through AWS_ENDPOINT_URL."""
    from moto.server import ThreadedMotoServer

    from tornasole.aws.clients import clear_client_cache, client

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(
        {
            "AWS_ENDPOINT_URL": f"http://{host}:{port}",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        }
    )
    clear_client_cache()
    client("s3").create_bucket(Bucket=BUCKET)
    return server


def marker_writer(out_dir: str) -> Any:
    """A function writing the stop marker the way the evaluator does (PutObject / atomic file write)."""
    if out_dir.startswith("s3://"):
        from tornasole.aws.clients import client

        s3 = client("s3")
        bucket, prefix = out_dir.removeprefix("s3://").split("/", 1)
        return lambda: s3.put_object(Bucket=bucket, Key=f"{prefix}/{STOP_SIGNAL}", Body=b"{}")
    from tornasole.storage.schemes import get_storage

    storage = get_storage(out_dir)
    return lambda: storage.write_atomic(os.path.join(out_dir, STOP_SIGNAL), b"{}")


def one_stop(out_dir: str, step_ms: float, rng: random.Random) -> tuple[float, int]:
    """Run a loop until the hook reports the stop; returns (marker written -> seen, steps in between)."""
    write = marker_writer(out_dir)
    written: list[float] = []
    delay = rng.uniform(0.3, 1.8)
    a = np.random.default_rng(0).standard_normal((160, 160)).astype(np.float32)
    n = max(1, int(step_ms))
    with Hook(out_dir, save_config=SaveConfig(save_interval=10**9)) as hook:

        def verdict() -> None:
            time.sleep(delay)
            write()
            written.append(time.monotonic())

        t = threading.Thread(target=verdict, daemon=True)
        t.start()
        steps_after = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for _ in range(n):
                a = np.tanh(a @ a.T * 1e-3)  # about 1 ms of work on one core
            hook.next_step()
            if written:
                steps_after += 1
            if hook.stop_requested:
                seen = time.monotonic()
                break
        else:
            raise RuntimeError(f"{out_dir}: no stop seen within 60 s")
        t.join()
    return seen - written[0], steps_after


def step_cost(out_dir: str, steps: int, interval: float | None) -> float:
    """Seconds per ``next_step()`` + ``stop_requested`` on a hook polling every ``interval`` (None: off)."""
    with Hook(out_dir, save_config=SaveConfig(save_interval=10**9), stop_check_interval=interval) as hook:
        time.sleep(0.05)  # let the poller start
        t0 = time.perf_counter()
        stopped = False
        for _ in range(steps):
            hook.next_step()
            stopped |= hook.stop_requested
        elapsed = time.perf_counter() - t0
    assert not stopped
    return elapsed / steps


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stops", type=int, default=20, help="stops measured per backend (default 20)")
    ap.add_argument("--step-ms", type=float, default=5.0, help="work per training step, ms (default 5)")
    ap.add_argument("--steps", type=int, default=100_000, help="steps per cost measurement (default 100,000)")
    ap.add_argument(
        "--repeat", type=int, default=3, help="alternated cost measurements per setting (default 3)"
    )
    ap.add_argument("--backends", default="s3,local", help="comma-separated: s3, local (default both)")
    args = ap.parse_args()
    logging.getLogger("tornasole").setLevel(logging.ERROR)
    print(
        f"hook default stop_check_interval: {DEFAULT_STOP_CHECK_INTERVAL} s; load average {os.getloadavg()}"
    )
    server = None
    rng = random.Random(1)
    try:
        for backend in args.backends.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                if backend == "s3":
                    server = server or start_moto()
                    base = f"s3://{BUCKET}/run"
                else:
                    base = os.path.join(tmp, "run")
                lat, steps = [], []
                for i in range(args.stops):
                    seconds, n = one_stop(f"{base}{i}", args.step_ms, rng)
                    lat.append(seconds)
                    steps.append(n)
                print(
                    f"{backend}: marker written -> hook.stop_requested: p50 {statistics.median(lat):.3f} s, "
                    f"p90 {pct(lat, 0.9):.3f} s, max {max(lat):.3f} s (n={len(lat)}); steps in between: "
                    f"p50 {statistics.median(steps):.0f}, max {max(steps)} at ~{args.step_ms:g} ms per step"
                )
                on, off = [], []
                for r in range(args.repeat):
                    off.append(step_cost(f"{base}-cost-off{r}", args.steps, None))
                    on.append(step_cost(f"{base}-cost-on{r}", args.steps, DEFAULT_STOP_CHECK_INTERVAL))
                print(
                    f"{backend}: per step, next_step() + stop_requested: poller off {min(off) * 1e6:.2f} us, "
                    f"on (every {DEFAULT_STOP_CHECK_INTERVAL} s) {min(on) * 1e6:.2f} us, "
                    f"difference {(min(on) - min(off)) * 1e6:+.2f} us "
                    f"(best of {args.repeat}, {args.steps} steps each)"
                )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()

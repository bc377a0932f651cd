"""Local mode latency: step landed -> state-change event, -> stop signal stored, -> seen by the hook.

    .venv/bin/python bench/latency.py                     # 1 job x 10 rounds, then 20 concurrent jobs
    .venv/bin/python bench/latency.py --jobs 5 --rounds 1 # quick

Why: a rule is only useful if its verdict arrives while the run can still be
stopped. The path measured is the whole local pipeline, as a user runs it
(``tornasole.local.LocalMode``: moto server, S3 notifications, the
``on_object_created`` / ``publish_events`` handlers, EventBridge -> SQS):

- each job is registered with ``ExplodingTensor`` and a ``stoptraining`` action;
- a writer thread per job writes three healthy steps with the real trial
  writer, one every ``--step-interval`` seconds (1 s), then one step with a NaN;
  "landed" is when that step's index object PUT returned (the object that
  triggers the evaluation);
- "event" is when the first ``SageMaker Training Job State Change`` event with
  the rule ``IssuesFound`` reaches the bus's SQS target (the CLI prints it);
- "stop" is when ``<trial>/tornasole_stop_training.json`` exists in the local S3
  (what the hook's stop poller reads), checked every 0.05 s in moto's backend
  rather than by HEAD requests that would load the server being measured;
- "seen by the hook" is when ``hook.stop_requested`` turns true: each job runs the
  hook's own poller (``tornasole.hooks.stop_signal.StopSignalPoller``, the flag
  ``stop_requested`` reads) with the hook's default interval, HEAD requests to the
  local S3 included, from the job's start.

Prints p50/p99/max per scenario; for the concurrent one also the steps evaluated per
second, this process's CPU per step and the AWS requests per step by operation.
Target (issue 10): p50 < 1 s, p99 < 3 s on 2 cores.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "layers"))  # run from a checkout without install

from tornasole.format.writer import StepWriter, TrialWriter  # noqa: E402
from tornasole.modes import ModeKeys  # noqa: E402

RULE = "ExplodingTensor"
HEALTHY_STEPS = 3
# How often each job looks for its stop signal in moto's backend ("stored"; the hook's own poller runs too).
STOP_POLL_SECONDS = 0.05
COLLECTIONS = {"losses": {"name": "losses", "include_regex": ["loss.*"]}}


class Observer:
    """Timestamps of the first IssuesFound state-change event per job (subscriber of the dispatcher)."""

    def __init__(self) -> None:
        self.event_at: dict[str, float] = {}
        self.changed = threading.Condition()

    def on_event(self, event: dict[str, Any]) -> None:
        now = time.monotonic()
        d = event.get("detail", {})
        if event.get("detail-type") != "SageMaker Training Job State Change":
            return
        statuses = {
            s["RuleConfigurationName"]: s["RuleEvaluationStatus"]
            for s in d.get("DebugRuleEvaluationStatuses", [])
        }
        if statuses.get(RULE) == "IssuesFound":
            with self.changed:
                self.event_at.setdefault(d["TrainingJobName"], now)
                self.changed.notify_all()


class RequestCounter:
    """AWS requests made in this process (the handlers, the local mode's sources, the writers), by operation.

    A botocore ``before-call`` handler on every client created after ``install``; ``snapshot``/``since``
    give the requests of one scenario. The server's own work per request is what the figures pay for.
    """

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def install(self) -> None:
        from botocore.handlers import BUILTIN_HANDLERS

        BUILTIN_HANDLERS.append(("before-call", self._count))

    def _count(self, event_name: str = "", **_: Any) -> None:
        op = event_name.split(".", 1)[-1]
        with self._lock:
            self.counts[op] += 1

    def snapshot(self) -> collections.Counter[str]:
        with self._lock:
            return collections.Counter(self.counts)

    def since(self, before: collections.Counter[str]) -> collections.Counter[str]:
        return self.snapshot() - before


def stop_signal_stored(bucket: str, key: str) -> bool:
    """Whether the object is in the local S3 (moto's backend, in this process).

    A HEAD request per job every 0.1 s would be served by the same two cores that run
    the pipeline (20 jobs: 200 requests/s) and slow down what is measured; the object
    is in the backend exactly when a HEAD from the hook would find it.
    """
    from moto.s3.models import s3_backends

    return any(
        key in backend.buckets[bucket].keys
        for regions in s3_backends.values()
        for backend in regions.values()
        if bucket in backend.buckets
    )


def _step(step: int, loss: float) -> StepWriter:
    sw = StepWriter(step, "worker_0", mode=ModeKeys.TRAIN, mode_step=step)
    sw.add_tensor("loss", np.float32(loss), wall_time=time.time())
    return sw


def run_job(
    name: str, trial: str, observer: Observer, timeout: float, step_interval: float
) -> tuple[float, float, float]:
    """Write the job's steps; returns (landed -> event, landed -> stop stored, landed -> stop seen by
    the hook's poller at its default interval) in seconds."""
    from tornasole.format.paths import STOP_SIGNAL
    from tornasole.hooks.stop_signal import StopSignalPoller
    from tornasole.storage.schemes import get_storage

    poller = StopSignalPoller(get_storage(trial), f"{trial}/{STOP_SIGNAL}")
    seen: list[float] = []
    watcher = threading.Thread(
        target=lambda: poller.wait(timeout + 10 * step_interval) and seen.append(time.monotonic()),
        daemon=True,
    )
    poller.start()
    watcher.start()
    writer = TrialWriter(trial)
    writer.write_collections(COLLECTIONS, 1)
    for step in range(HEALTHY_STEPS):
        writer.write_step(_step(step, 1.0 / (step + 1)))
        time.sleep(step_interval)
    writer.write_step(_step(HEALTHY_STEPS, float("nan")))
    landed = time.monotonic()
    bucket, prefix = trial.removeprefix("s3://").split("/", 1)
    stop_key = f"{prefix}/tornasole_stop_training.json"
    stop_at = None
    deadline = landed + timeout
    while time.monotonic() < deadline:
        if stop_at is None and stop_signal_stored(bucket, stop_key):
            stop_at = time.monotonic()
        if stop_at is not None and name in observer.event_at and seen:
            break
        time.sleep(STOP_POLL_SECONDS)
    poller.close()
    event_at = observer.event_at.get(name)
    if event_at is None or stop_at is None or not seen:
        missing = (
            "event" if event_at is None else "stop signal" if stop_at is None else "hook's stop_requested"
        )
        raise TimeoutError(f"{name}: no {missing} within {timeout:.0f} s")
    return event_at - landed, stop_at - landed, seen[0] - landed


def scenario(
    local: Any,
    observer: Observer,
    prefix: str,
    jobs: int,
    timeout: float,
    step_interval: float,
    requests: RequestCounter | None = None,
) -> list[tuple[float, float, float]]:
    from tornasole.jobs import register_job

    names = [f"{prefix}-{i:02d}" for i in range(jobs)]
    action = json.dumps({"name": "stoptraining"})
    for name in names:
        rules = [
            {"RuleConfigurationName": RULE, "RuleParameters": {"rule_to_invoke": RULE, "action_json": action}}
        ]
        register_job(name, f"{local.trial_root}{name}", rules)
    results: dict[str, tuple[float, float, float] | BaseException] = {}

    def one(name: str) -> None:
        try:
            results[name] = run_job(name, f"{local.trial_root}{name}", observer, timeout, step_interval)
        except BaseException as exc:
            results[name] = exc

    threads = [threading.Thread(target=one, args=(n,)) for n in names]
    counted = requests.snapshot() if requests else None
    cpu = time.process_time()
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if jobs > 1:
        # Every job saves a step per --step-interval; what the machine evaluates per second decides the queue.
        steps = jobs * (HEALTHY_STEPS + 1)
        took = time.monotonic() - started
        print(
            f"{jobs} jobs: {steps} steps written at {jobs / step_interval:.0f} steps/s, all verdicts in "
            f"{took:.1f} s: the local mode evaluated about {steps / took:.1f} steps/s, "
            f"{1000 * (time.process_time() - cpu) / steps:.0f} ms of CPU per step (this process)",
            flush=True,
        )
        if requests is not None and counted is not None:
            made = requests.since(counted)
            top = ", ".join(f"{op} {n / steps:.2f}" for op, n in made.most_common(12))
            print(
                f"{jobs} jobs: {sum(made.values()) / steps:.1f} AWS requests per step, all included "
                f"(the writers' 2 PUTs, the event subscriber's SQS calls): {top}",
                flush=True,
            )
    errors = [r for r in results.values() if isinstance(r, BaseException)]
    if errors:
        raise RuntimeError(f"{len(errors)} of {jobs} jobs failed: {errors[0]}")
    return [r for r in results.values() if not isinstance(r, BaseException)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def report(label: str, samples: list[tuple[float, float, float]]) -> None:
    for kind, values in (
        ("state-change event", [s[0] for s in samples]),
        ("stop signal stored", [s[1] for s in samples]),
        ("hook.stop_requested (default checks)", [s[2] for s in samples]),
    ):
        print(
            f"{label}: step landed -> {kind}: p50 {statistics.median(values):.2f} s, "
            f"p99 {percentile(values, 99):.2f} s, max {max(values):.2f} s (n={len(values)})",
            flush=True,
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--jobs", type=int, default=20, help="concurrent jobs of the second scenario (default 20)"
    )
    ap.add_argument("--rounds", type=int, default=1, help="rounds of the concurrent scenario (default 1)")
    ap.add_argument(
        "--step-interval",
        type=float,
        default=1.0,
        help="seconds between a job's saved steps (default 1; every job saves at this pace)",
    )
    ap.add_argument(
        "--single-rounds", type=int, default=10, help="rounds of the one-job scenario (default 10)"
    )
    ap.add_argument("--timeout", type=float, default=120.0, help="per job, seconds (default 120)")
    args = ap.parse_args()
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

    from tornasole.local import LocalMode, LocalSettings

    observer = Observer()
    requests = RequestCounter()
    requests.install()
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load:.1f} before the run (other work slows every figure)")
    with LocalMode(LocalSettings(port=0)) as local:
        assert local.dispatcher is not None
        local.dispatcher.event_subscribers.append(observer.on_event)
        single: list[tuple[float, float, float]] = []
        for r in range(args.single_rounds):
            single += scenario(local, observer, f"single-{r:02d}", 1, args.timeout, args.step_interval)
        if single:
            report("1 job", single)
        many: list[tuple[float, float, float]] = []
        for r in range(args.rounds):
            many += scenario(
                local, observer, f"many-{r:02d}", args.jobs, args.timeout, args.step_interval, requests
            )
        if many:
            report(f"{args.jobs} concurrent jobs", many)
        print(f"load average {os.getloadavg()[0]:.1f} after the run", flush=True)
        if local.dispatcher.errors:
            print("dispatcher errors: " + "; ".join(local.dispatcher.errors[:5]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

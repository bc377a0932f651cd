"""Cost of evaluating one step: handler time and S3 requests, after 10 and after 10,000 prior steps.

    .venv/bin/python bench/step_cost.py                      # defaults (about 1-2 minutes on 2 cores)
    .venv/bin/python bench/step_cost.py --prior 10,1000 --measure 3   # quick

Why: the issue's "Performance" section asks that the cost of a step does not
grow with the length of the run (target ratio <= 1.2) and stays under 100 ms
for 50 tensors of 10k floats. The measured path is the deployed one: the
``on_object_created`` handler (``tornasole.lambda_support.handlers.load_handler``)
gets an S3 ObjectCreated event for the step's index file, against a moto
``ThreadedMotoServer`` on 127.0.0.1 holding the stack's resources
(``tornasole.local.resources.create_resources``).

Per size, one job is registered with a fixed four-rule set (``BENCH_RULES``, the
demo's rule set when these numbers were first taken, kept so they stay comparable).
Prior steps are written directly with
``tornasole.format.writer`` (the same 51 tensor names, but one float each, so
generating 10,000 steps stays bounded) and recorded in the state table as
evaluated steps, as the handler would have left them; the bucket's notifications
are switched off first (the bench delivers the events itself). Each measured
step then carries 50 float32 tensors of 10k elements plus the loss; one warm-up
step per job is not counted. S3 and DynamoDB requests are counted with a
botocore ``before-call`` hook on the clients of ``tornasole.aws.clients``; S3
requests also by the object they read (the step's own index and event files, an
earlier step's, the collections file) and per measured step, so a count that
grows from one measured step to the next shows (the mean alone hid it).

Why handler time is also printed without the DynamoDB calls: moto's DynamoDB
is not a constant-cost emulator. Its ``TransactWriteItems`` (moto 5.2.5) deep-copies
the whole table, stream records included, once per item of the transaction
(the rollback copy), and its ``Query`` walks the whole partition, so those calls
get slower with every item the run has stored, although the evaluator sends the
same requests (a real table answers by key). The request counts are the
run-length-independent contract; "the rest" (S3 reads over the moto server,
decoding, the rules, the handler) is the time the evaluator itself spends.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# this checkout's code, not the copy installed (editable) in the venv: a worktree's bench measures its own
sys.path.insert(0, str(REPO / "layers"))
BUCKET = "tornasole-bench"
TENSORS_PER_KIND = 25  # 25 gradients + 25 ReLU outputs = 50 tensors (+ the loss)
ELEMENTS = 10_000
COLLECTIONS = {
    "gradients": {"name": "gradients", "include_regex": ["gradients/.*"]},
    "relu_output": {"name": "relu_output", "include_regex": [".*relu_output"]},
    "losses": {"name": "losses", "include_regex": ["loss"]},
}


def start_moto() -> Any:
    """A moto server on loopback, the environment local mode sets, and the stack's resources."""
    from moto.server import ThreadedMotoServer

    from tornasole import config
    from tornasole.aws.clients import clear_client_cache, client
    from tornasole.local.resources import create_resources
    from tornasole.stack_spec import DEFAULT_SPEC

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
            "POWERTOOLS_METRICS_DISABLED": "true",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            config.STATE_TABLE: DEFAULT_SPEC.table.name,
            config.EVENT_BUS: DEFAULT_SPEC.bus.name,
            config.EVENT_SOURCE: DEFAULT_SPEC.bus.source,
            config.TRIAL_BUCKET: BUCKET,
        }
    )
    clear_client_cache()
    res = create_resources(BUCKET, DEFAULT_SPEC)
    os.environ[config.ALERT_TOPIC_ARN] = res.topic_arn
    # the bench hands each measured event to the handler itself: no queued notification per prior file
    client("s3").put_bucket_notification_configuration(Bucket=BUCKET, NotificationConfiguration={})
    return server


def step_writer(step: int, elements: int, rng: np.random.Generator) -> Any:
    from tornasole.format.writer import StepWriter
    from tornasole.modes import ModeKeys

    sw = StepWriter(step, "worker_0", mode=ModeKeys.TRAIN, mode_step=step)
    for i in range(TENSORS_PER_KIND):
        grad = rng.uniform(1e-3, 2e-3, elements).astype(np.float32)
        sw.add_tensor(f"gradients/layer{i}.weight", grad, wall_time=1.0)
        relu = np.maximum(rng.standard_normal(elements), 0.0).astype(np.float32) + np.float32(0.01)
        sw.add_tensor(f"layer{i}_relu_output", relu, wall_time=1.0)
    sw.add_tensor("loss", np.float32(10.0 / (1.0 + 0.01 * step)), wall_time=1.0)
    return sw


def record_prior_steps(job: str, steps: range) -> None:
    """The step items the handler would have left: every prior step seen and evaluated."""
    from tornasole.aws.clients import client
    from tornasole.evaluator.store.state_table import StateTable, job_pk, step_sk

    table = StateTable(os.environ["TORNASOLE_STATE_TABLE"])
    ddb = client("dynamodb")
    items = [
        table.to_attrs(
            {
                "pk": job_pk(job),
                "sk": step_sk(s),
                "step": s,
                "workers": {"worker_0"},
                "first_seen": 1,
                "last_seen": 1,
                "evaluated": 1,
            }
        )
        for s in steps
    ]
    for i in range(0, len(items), 25):
        batch = [{"PutRequest": {"Item": it}} for it in items[i : i + 25]]
        while batch:
            resp = ddb.batch_write_item(RequestItems={table.name: batch})
            batch = resp.get("UnprocessedItems", {}).get(table.name, [])


class MotoBackendStorage:
    """``write_atomic`` straight into the moto server's S3 backend (same process), for the prior steps.

    Why: 20,000 PutObjects over HTTP take about 90 s on 2 cores, a backend put 0.05 ms; the bytes are
    still the writer's and the handler reads them back through the server like any other object.
    """

    def __init__(self, bucket: str) -> None:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        self.backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        self.bucket = bucket

    def write_atomic(self, path: str, data: bytes) -> None:
        self.backend.put_object(self.bucket, path.removeprefix(f"s3://{self.bucket}/"), data)


BENCH_RULES = ("VanishingGradient", "ExplodingTensor", "LossNotDecreasing", "DeadRelu")


def prepare_job(prior: int) -> tuple[str, str]:
    """Register a job, write its collections and ``prior`` tiny steps; returns (job, trial prefix key)."""
    from tornasole.format.writer import TrialWriter
    from tornasole.jobs import register_job

    job = f"bench-{prior}"
    prefix = f"jobs/{job}"
    trial = f"s3://{BUCKET}/{prefix}"
    rules = [{"RuleConfigurationName": r, "RuleParameters": {"rule_to_invoke": r}} for r in BENCH_RULES]
    register_job(job, trial, rules)
    TrialWriter(trial).write_collections(COLLECTIONS, num_workers=1)
    writer = TrialWriter(trial, storage=MotoBackendStorage(BUCKET))  # type: ignore[arg-type]
    for s in range(prior):
        writer.write_step(step_writer(s, 1, np.random.default_rng(s)))
    record_prior_steps(job, range(prior))
    return job, prefix


def s3_event(key: str) -> dict[str, Any]:
    event = json.loads((REPO / "tests" / "events" / "s3_put_index.json").read_text())
    event["Records"][0]["s3"]["bucket"]["name"] = BUCKET
    event["Records"][0]["s3"]["object"]["key"] = key
    return event


class RequestLog:
    """Counts S3 and DynamoDB requests and the wall time of DynamoDB calls (botocore events).

    S3 requests are also counted by the object they read (``s3_objects``): the evaluated step's own
    index or event file, an earlier step's, the collections file. Why: the mean per step hides a count
    that grows with each measured step (an earlier step's event file re-read at every later step, as
    DeadRelu's pooling did before the evaluator kept earlier values), the objects name the culprit.
    """

    SERVICES = ("s3", "dynamodb")
    STEP_DIR = re.compile(r"/(?:events/(\d+)|index/\d+/(\d+)_)")

    def __init__(self) -> None:
        self.calls: Counter = Counter()
        self.s3_objects: Counter = Counter()  # "GetObject event file, earlier step" -> requests
        self.step: int | None = None  # the evaluated step (its own files vs earlier steps')
        self.ddb_s = 0.0
        self.ddb_op_s: Counter = Counter()  # seconds per DynamoDB operation
        self._started: dict[int, float] = {}

    def s3_object(self, url_path: str) -> str:
        """What an S3 request's path names, relative to the evaluated step."""
        if "/collections/" in url_path:
            return "collections file"
        m = self.STEP_DIR.search(url_path)
        if m is None:
            return "other"
        kind = "event file" if m.group(1) is not None else "index file"
        step = int(m.group(1) if m.group(1) is not None else m.group(2))
        return f"{kind}, {'this step' if step == self.step else 'earlier step'}"

    def before(self, event_name: str, params: dict[str, Any] | None = None, **_: Any) -> None:
        op = event_name.split(".", 1)[1]  # "s3.GetObject", "dynamodb.Query", ...
        self.calls[op] += 1
        if op.startswith("s3."):
            self.s3_objects[f"{op[3:]} {self.s3_object((params or {}).get('url_path', ''))}"] += 1
        if event_name.startswith("before-call.dynamodb"):
            self._started[threading.get_ident()] = time.perf_counter()

    def after(self, event_name: str, **_: Any) -> None:
        started = self._started.pop(threading.get_ident(), None)
        if started is not None:
            self.ddb_s += time.perf_counter() - started
            self.ddb_op_s[event_name.split(".", 2)[2]] += time.perf_counter() - started

    def __enter__(self) -> RequestLog:
        from tornasole.aws.clients import client

        for service in self.SERVICES:
            client(service).meta.events.register(f"before-call.{service}", self.before)
            client(service).meta.events.register(f"after-call.{service}", self.after)
        return self

    def __exit__(self, *exc: object) -> None:
        from tornasole.aws.clients import client

        for service in self.SERVICES:
            client(service).meta.events.unregister(f"before-call.{service}", self.before)
            client(service).meta.events.unregister(f"after-call.{service}", self.after)

    def reset(self, step: int | None = None) -> None:
        self.step = step
        self.calls.clear()
        self.s3_objects.clear()
        self.ddb_s = 0.0
        self.ddb_op_s.clear()


def measure(handler: Any, prefix: str, first: int, count: int) -> list[dict[str, Any]]:
    """Write and evaluate steps ``first .. first+count`` (the first one warms up and is not counted)."""
    from tornasole.format import paths
    from tornasole.format.writer import TrialWriter
    from tornasole.local.dispatcher import LocalLambdaContext

    writer = TrialWriter(f"s3://{BUCKET}/{prefix}")
    context = LocalLambdaContext(function_name="on_object_created")
    rng = np.random.default_rng(first)
    samples = []
    with RequestLog() as requests:
        for step in range(first, first + count + 1):
            writer.write_step(step_writer(step, ELEMENTS, rng))
            event = s3_event(f"{prefix}/{paths.index_file_name(step, 'worker_0')}")
            requests.reset(step)
            start = time.perf_counter()
            out = handler(event, context)
            elapsed = time.perf_counter() - start
            result = out["results"][0]
            if result["action"] != "evaluated" or "Error" in result["rules"].values():
                raise SystemExit(f"step {step} was not evaluated cleanly: {result}")
            if step > first:
                samples.append(
                    {
                        "s": elapsed,
                        "ddb_s": requests.ddb_s,
                        "calls": Counter(requests.calls),
                        "s3_objects": Counter(requests.s3_objects),
                        "ddb_op_s": Counter(requests.ddb_op_s),
                    }
                )
    return samples


def summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    def count(service: str) -> float:
        return statistics.mean(
            sum(v for k, v in x["calls"].items() if k.startswith(service)) for x in samples
        )

    ops = sum((x["calls"] for x in samples), Counter())
    objects = sum((x["s3_objects"] for x in samples), Counter())
    op_s = sum((x["ddb_op_s"] for x in samples), Counter())
    return {
        "ms": statistics.median(x["s"] for x in samples) * 1000,
        "ddb_ms": statistics.median(x["ddb_s"] for x in samples) * 1000,
        "rest_ms": statistics.median(x["s"] - x["ddb_s"] for x in samples) * 1000,
        "s3": count("s3."),
        "ddb": count("dynamodb."),
        "ops": {k: round(v / len(samples), 1) for k, v in sorted(ops.items())},
        "s3_objects": {k: round(v / len(samples), 1) for k, v in sorted(objects.items())},
        "s3_each": [sum(v for k, v in x["calls"].items() if k.startswith("s3.")) for x in samples],
        "ddb_op_ms": {k: round(v * 1000 / len(samples), 1) for k, v in sorted(op_s.items())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prior", default="10,10000", help="prior step counts, comma separated")
    parser.add_argument("--measure", type=int, default=5, help="measured steps per size (after a warm-up)")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.prior.split(",")]
    started = time.perf_counter()
    server = start_moto()
    try:
        from tornasole.lambda_support.handlers import load_handler
        from tornasole.stack_spec import DEFAULT_SPEC

        handler = load_handler(DEFAULT_SPEC.on_object_created)
        results = {}
        for prior in sizes:
            t0 = time.perf_counter()
            _, prefix = prepare_job(prior)
            gen = time.perf_counter() - t0
            results[prior] = r = summary(measure(handler, prefix, prior, args.measure))
            print(
                f"{prior:>6} prior steps: {r['ms']:6.1f} ms/step (median of {args.measure}; DynamoDB calls "
                f"{r['ddb_ms']:.1f} ms, the rest {r['rest_ms']:.1f} ms), {r['s3']:.1f} S3 and {r['ddb']:.1f} "
                f"DynamoDB requests/step  [prior steps generated in {gen:.1f} s]"
            )
            print(f"        requests per step: {r['ops']}")
            print(f"        S3 requests per step by object: {r['s3_objects']}")
            print(f"        S3 requests of each measured step: {r['s3_each']}")
            print(f"        ms per step in DynamoDB calls (moto): {r['ddb_op_ms']}")
        lo, hi = results[sizes[0]], results[sizes[-1]]
        print(
            f"ratio {sizes[-1]}/{sizes[0]} prior steps: S3 requests {hi['s3'] / lo['s3']:.2f}, DynamoDB "
            f"requests {hi['ddb'] / lo['ddb']:.2f}, handler time {hi['ms'] / lo['ms']:.2f}, handler time "
            f"outside DynamoDB calls {hi['rest_ms'] / lo['rest_ms']:.2f} (target <= 1.2)"
        )
    finally:
        server.stop()
    print(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

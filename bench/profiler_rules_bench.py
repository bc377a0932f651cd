"""Profiler rules on a one-hour job's metrics, file by file, in local mode: the time each file costs.

    .venv/bin/python bench/profiler_rules_bench.py                 # 60 minutes (about a minute on 2 cores)
    .venv/bin/python bench/profiler_rules_bench.py --minutes 10    # quick

The issue's target: the profiler rules evaluate each metrics file within 1 s of its landing, with one
Lambda invocation per file. The job's profile is SageMaker's default: 500 ms sampling, files rotated
every 60 s, a node with 8 cores and 1 GPU (per sample: 8 per-core CPU lines, the machine's CPU, I/O
wait, host memory, GPU utilisation and GPU memory: 13 lines), plus a framework trace file per minute
(240 steps of 250 ms). The job runs ProfilerReport (all eleven profiler rules) and, beside it,
CPUBottleneck, LowGPUUtilization and StepOutlier configured on their own: every rule folds every file.

Each file is put into the moto server's S3 over HTTP (as the hook would), then the deployed
``on_object_created`` handler gets its S3 event once (one invocation per file) and is timed; the
stored states' size is read after the last file. Setup (moto server, stack resources) is
``step_cost.start_moto``; moto's DynamoDB is slower than a real table's per-key work, so these times
are an upper bound on the evaluator's own cost.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from step_cost import BUCKET, RequestLog, s3_event, start_moto  # noqa: E402

T0 = 1_700_000_000
CORES = 8
SAMPLE_S = 0.5
FILE_S = 60
STEP_S = 0.25


def system_file(minute: int) -> tuple[str, bytes]:
    from tornasole.profiler.format import paths
    from tornasole.profiler.format import system_records as sr
    from tornasole.profiler.format.system_records import SystemRecord

    records = []
    start = T0 + minute * FILE_S
    for i in range(int(FILE_S / SAMPLE_S)):
        ts = start + i * SAMPLE_S
        wave = (i % 20) / 20
        for c in range(CORES):
            records.append(
                SystemRecord("cpu", f"cpu{c}", sr.CPU_UTILIZATION, 40 + 30 * wave + c, "algo-1", ts)
            )
        records += [
            SystemRecord("cpu", sr.CPU_TOTAL, sr.CPU_UTILIZATION, 45 + 30 * wave, "algo-1", ts),
            SystemRecord("cpu", sr.CPU_TOTAL, sr.IO_WAIT, 2 + wave, "algo-1", ts),
            SystemRecord("memory", sr.MEMORY_USED_PERCENT, sr.MEMORY_USED_PERCENT, 35.0, "algo-1", ts),
            SystemRecord("gpu", "gpu0", sr.GPU_UTILIZATION, 60 + 35 * wave, "algo-1", ts),
            SystemRecord("gpu", "gpu0", sr.GPU_MEMORY_UTILIZATION, 40 + 0.01 * minute, "algo-1", ts),
        ]
    return paths.system_file_name(start), sr.encode_records(records).encode()


def framework_file(minute: int) -> tuple[str, bytes]:
    from tornasole.profiler.format import paths, trace_events
    from tornasole.profiler.format.trace_events import TraceEvent

    origin = (T0 + minute * FILE_S) * 1_000_000
    per_file = int(FILE_S / STEP_S)
    events, at = [], origin
    phase = trace_events.step_phase("TRAIN")
    for i in range(per_file):
        dur = int(STEP_S * 1e6 * (1.0 + 0.02 * ((i * 7) % 5)))
        events.append(TraceEvent(phase, phase, at, dur, args={"step_num": str(minute * per_file + i)}))
        events.append(TraceEvent(trace_events.FORWARD, trace_events.FORWARD, at, dur // 3))
        events.append(TraceEvent(trace_events.BACKWARD, trace_events.BACKWARD, at + dur // 3, dur // 2))
        at += dur
    text = trace_events.encode_trace_file(origin, events)
    return paths.framework_file_name(at, paths.framework_node_id(0, "algo-1")), text.encode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=int, default=60, help="minutes of training (files of each kind)")
    args = parser.parse_args(argv)
    server = start_moto()
    try:
        from tornasole.aws.clients import client
        from tornasole.evaluator.models import RuleConfig
        from tornasole.evaluator.store.profiler_state import ProfilerStateStore
        from tornasole.evaluator.store.state_table import StateTable
        from tornasole.jobs import register_job
        from tornasole.lambda_support.handlers import load_handler
        from tornasole.local.dispatcher import LocalLambdaContext
        from tornasole.stack_spec import DEFAULT_SPEC

        job, prefix = "bench-profiler", "jobs/bench-profiler"
        rules = [
            RuleConfig(name=n, rule_to_invoke=n, profiler=True, rule_parameters={"rule_to_invoke": n})
            for n in ("ProfilerReport", "CPUBottleneck", "LowGPUUtilization", "StepOutlier")
        ]
        register_job(job, f"s3://{BUCKET}/{prefix}", rules)
        handler = load_handler(DEFAULT_SPEC.on_object_created)
        context = LocalLambdaContext(function_name="on_object_created")
        s3 = client("s3")
        from tornasole.profiler.format.system_records import decode_records
        from tornasole.profiler.format.trace_events import decode_trace_file
        from tornasole.rules.profiler import create_profiler_rule
        from tornasole.rules.profiler.base import samples_of

        times: dict[str, list[float]] = {"system": [], "framework": []}
        ddb: dict[str, list[float]] = {"system": [], "framework": []}
        fold: dict[str, list[float]] = {"system": [], "framework": []}
        sizes: dict[str, list[int]] = {"system": [], "framework": []}
        calls: dict[str, object] = {}
        offline = [create_profiler_rule(r.rule_to_invoke) for r in rules]
        offline_states = [r.initial_state() for r in offline]
        with RequestLog() as requests:
            for minute in range(args.minutes):
                for kind, (relative, body) in (
                    ("system", system_file(minute)),
                    ("framework", framework_file(minute)),
                ):
                    key = f"{prefix}/profiler-output/{relative}"
                    s3.put_object(Bucket=BUCKET, Key=key, Body=body)
                    requests.reset()
                    started = time.perf_counter()
                    out = handler(s3_event(key), context)
                    times[kind].append(time.perf_counter() - started)
                    ddb[kind].append(requests.ddb_s)
                    calls[kind] = dict(requests.calls)
                    sizes[kind].append(len(body))
                    (result,) = out["results"]
                    assert result["action"] == "evaluated", result
                    # the evaluator's own work on the file, without AWS: decode + fold into the 4 rules
                    started = time.perf_counter()
                    payload = decode_records(body) if kind == "system" else decode_trace_file(body)
                    samples = samples_of(payload) if kind == "system" else None
                    for rule, state in zip(offline, offline_states, strict=True):
                        rule.update(state, kind, payload, samples)
                        rule.finding(state)
                    fold[kind].append(time.perf_counter() - started)
        states = ProfilerStateStore(StateTable(DEFAULT_SPEC.table.name)).load(job)
        state_bytes = {name: len(json.dumps(s.state, separators=(",", ":"))) for name, s in states.items()}
        report = {
            "minutes": args.minutes,
            "files": sum(len(v) for v in times.values()),
            "invocations_per_file": 1,
            "files_folded_per_rule": {name: s.files for name, s in states.items()},
            "statuses": {name: ("fired" if s.fired else "quiet") for name, s in states.items()},
            "state_bytes": state_bytes,
        }
        for kind, values in times.items():
            ordered = sorted(values)
            report[kind] = {
                "file_bytes": int(statistics.mean(sizes[kind])),
                "median_ms": round(1000 * statistics.median(values), 1),
                "p95_ms": round(1000 * ordered[int(0.95 * (len(ordered) - 1))], 1),
                "max_ms": round(1000 * ordered[-1], 1),
                "first_ms": round(1000 * values[0], 1),
                "last_ms": round(1000 * values[-1], 1),
                "dynamodb_median_ms": round(1000 * statistics.median(ddb[kind]), 1),
                "without_dynamodb_median_ms": round(
                    1000 * statistics.median(t - d for t, d in zip(values, ddb[kind], strict=True)), 1
                ),
                "decode_and_fold_median_ms": round(1000 * statistics.median(fold[kind]), 1),
                "requests_per_file": calls[kind],
            }
        print(json.dumps(report, indent=2))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: reading a 1-hour job's profiler-output/ with our readers and with smdebug 1.0.34's.

    PYTHONPATH=layers .venv/bin/python bench/profiler_read_vs_smdebug.py [--minutes 60] [--steps-per-s 10]

The tree (written with our format, in a temporary folder removed at the end) is what a one-node job
leaves after ``--minutes``: one system file a minute with 8 cores, the total, I/O wait, memory, 1 GPU
(utilisation and memory), disk and network every 500 ms (SageMaker's default interval); one
python-timeline file a minute with ``--steps-per-s`` steps a second, each with its data-loader,
forward, backward and optimizer events. Each side, in a fresh interpreter of its own venv, times
``get_events`` over the whole job (system, then framework) and over one minute in the middle, and
counts the events (the counts must agree). Prints ``<query>: ours X s, smdebug Y s, ratio Y/X``.
Not a test: nothing fails on a slow ratio.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "layers"))

from tornasole.profiler.format import paths, system_records, trace_events  # noqa: E402
from tornasole.profiler.format.system_records import SystemRecord  # noqa: E402
from tornasole.profiler.format.trace_events import TraceEvent  # noqa: E402

T0 = 1_700_000_000
TIMING = r"""
import json, sys, time
which, root, t0, minutes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if which == "ours":
    from tornasole.profiler.readers import LocalSystemMetricsReader, LocalAlgorithmMetricsReader, TimeUnits
else:
    import logging
    logging.disable(logging.INFO)
    from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader
    from smdebug.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader
    from smdebug.profiler.utils import TimeUnits
out = {}
for name, make, window in [
    ("system, whole job", LocalSystemMetricsReader, (t0 - 1, t0 + 60 * minutes + 1)),
    ("system, one minute", LocalSystemMetricsReader, (t0 + 30 * minutes, t0 + 30 * minutes + 60)),
    ("framework, whole job", LocalAlgorithmMetricsReader, (t0 - 1, t0 + 60 * minutes + 1)),
    ("framework, one minute", LocalAlgorithmMetricsReader, (t0 + 30 * minutes, t0 + 30 * minutes + 60)),
]:
    start = time.perf_counter()
    events = make(root).get_events(*window, unit=TimeUnits.SECONDS)
    out[name] = [time.perf_counter() - start, len(events)]
print(json.dumps(out))
"""


def build(root: Path, minutes: int, steps_per_s: int) -> None:
    dims = [("cpu", f"cpu{c}", system_records.CPU_UTILIZATION) for c in range(8)] + [
        ("cpu", system_records.CPU_TOTAL, system_records.CPU_UTILIZATION),
        ("cpu", system_records.CPU_TOTAL, system_records.IO_WAIT),
        ("memory", "MemoryUsedPercent", system_records.MEMORY_USED_PERCENT),
        ("gpu", "gpu0", system_records.GPU_UTILIZATION),
        ("gpu", "gpu0", system_records.GPU_MEMORY_UTILIZATION),
        ("io", "nvme0n1", system_records.DISK_READ_BYTES),
        ("network", "eth0", system_records.NETWORK_RECEIVE_BYTES),
    ]
    step = trace_events.step_phase("TRAIN")
    period = 1_000_000 // steps_per_s
    for minute in range(minutes):
        start = T0 + 60 * minute
        records = [
            SystemRecord(kind, name, dim, float(i % 97), "algo-1", start + i * 0.5)
            for i in range(120)
            for kind, name, dim in dims
        ]
        target = root / paths.system_file_name(start)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(system_records.encode_records(records))
        origin = start * 1_000_000
        events = []
        for n in range(60 * steps_per_s):
            begin = origin + n * period
            num = {"step_num": str(minute * 60 * steps_per_s + n)}
            events += [
                TraceEvent(step, step, begin, period - 100, args=num),
                TraceEvent(trace_events.DATALOADER, "DataLoaderIter", begin + 10, period // 10),
                TraceEvent(trace_events.FORWARD, "Net", begin + period // 5, period // 4, args=num),
                TraceEvent(trace_events.BACKWARD, "Net", begin + period // 2, period // 3),
                TraceEvent(trace_events.OPTIMIZER, "SGD.step", begin + period - 500, 300),
            ]
        name = paths.framework_file_name(max(e.end_us for e in events), paths.framework_node_id(0, "algo-1"))
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(trace_events.encode_trace_file(origin, events))


def run(python: str, which: str, root: Path, minutes: int, env: dict) -> dict:
    proc = subprocess.run(
        [python, "-c", TIMING, which, str(root), str(T0), str(minutes)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=3600,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--steps-per-s", type=int, default=10)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="profiler-bench-"))
    try:
        root = tmp / "profiler-output"
        build(root, args.minutes, args.steps_per_s)
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        print(f"tree: {args.minutes} minutes, {size / 1e6:.1f} MB")
        ours = run(sys.executable, "ours", root, args.minutes, {"PYTHONPATH": str(REPO / "layers")})
        theirs = run(str(REPO / ".venv-smdebug" / "bin" / "python"), "smdebug", root, args.minutes, {})
        for query, (seconds, count) in ours.items():
            their_seconds, their_count = theirs[query]
            assert count == their_count, (query, count, their_count)
            print(
                f"{query} ({count} events): ours {seconds:.3f} s, smdebug {their_seconds:.3f} s, "
                f"ratio {their_seconds / seconds:.1f}"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

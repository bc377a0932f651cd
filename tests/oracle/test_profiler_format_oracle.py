"""smdebug 1.0.34's profiler readers read the files our profiler format writes, event for event."""

from __future__ import annotations

from pathlib import Path

from smdebug_runner import run_smdebug

from tornasole.profiler.format import paths, system_records, trace_events
from tornasole.profiler.format.system_records import SystemRecord
from tornasole.profiler.format.trace_events import TraceEvent

T0 = 1_700_000_000


def _write_tree(root: Path) -> tuple[list[SystemRecord], list[TraceEvent]]:
    records = [
        SystemRecord(
            "cpu", f"cpu{core}", system_records.CPU_UTILIZATION, 10.0 * core + i, "algo-1", T0 + i * 0.5
        )
        for i in range(4)
        for core in range(2)
    ] + [SystemRecord("gpu", "gpu0", system_records.GPU_UTILIZATION, 55.5, "algo-1", T0 + 1.0)]
    system = root / paths.system_file_name(T0)
    system.parent.mkdir(parents=True)
    system.write_text(system_records.encode_records(records))

    origin = T0 * 1_000_000
    events = [
        TraceEvent(
            trace_events.step_phase("TRAIN"),
            "Step:ModeKeys.TRAIN",
            origin + 10 + s * 1000,
            900,
            args={"step_num": str(s)},
        )
        for s in range(3)
    ] + [TraceEvent(trace_events.FORWARD, "model", origin + 20, 400, args={"step_num": "0"})]
    end = max(e.end_us for e in events)
    trace = root / paths.framework_file_name(end, paths.framework_node_id(0, "host"))
    trace.parent.mkdir(parents=True)
    trace.write_text(trace_events.encode_trace_file(origin, events))
    return records, events


def test_smdebug_reads_our_system_metrics_and_trace_events(tmp_path: Path) -> None:
    root = tmp_path / "profiler-output"
    records, events = _write_tree(root)
    result = run_smdebug(
        """
        from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader
        from smdebug.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader
        from smdebug.profiler.utils import TimeUnits
        system = LocalSystemMetricsReader(INPUT["root"]).get_events(
            INPUT["t0"] - 10, INPUT["t0"] + 10, unit=TimeUnits.SECONDS)
        reader = LocalAlgorithmMetricsReader(INPUT["root"])
        trace = reader.get_events((INPUT["t0"] - 10) * 10**6, (INPUT["t0"] + 10) * 10**6)
        emit({
            "system": sorted([e.type, e.name, e.dimension, e.value, e.node_id, e.timestamp] for e in system),
            "trace": sorted([e.event_phase, e.event_name, e.start_time, e.duration, e.event_args]
                            for e in trace if e.phase == "X"),
        })
        """,
        {"root": str(root), "t0": T0},
    )
    expected_system = sorted([r.type, r.name, r.dimension, r.value, r.node_id, r.timestamp] for r in records)
    assert result.data["system"] == expected_system
    expected_trace = sorted([e.phase, e.name, e.start_us, e.duration_us, dict(e.args)] for e in events)
    assert result.data["trace"] == expected_trace

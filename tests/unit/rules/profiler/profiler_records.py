"""Crafted system-metric records and trace files for the profiler rules' tests."""

from __future__ import annotations

from tornasole.profiler.format import system_records as sr
from tornasole.profiler.format.system_records import SystemRecord
from tornasole.profiler.format.trace_events import TraceEvent, TraceFile, step_phase

T0 = 1_700_000_000.0


def sample(
    t: float,
    *,
    cpu: float | None = 50.0,
    io_wait: float | None = 1.0,
    gpus: dict[str, float] | None = None,
    gpu_memory: dict[str, float] | None = None,
    cores: int = 0,
    node: str = "algo-1",
) -> list[SystemRecord]:
    """The records of one sampling instant ``t`` seconds after ``T0``."""
    ts = T0 + t
    out = []
    if cpu is not None:
        out.append(SystemRecord("cpu", sr.CPU_TOTAL, sr.CPU_UTILIZATION, cpu, node, ts))
    for i in range(cores):
        out.append(SystemRecord("cpu", f"cpu{i}", sr.CPU_UTILIZATION, cpu or 0.0, node, ts))
    if io_wait is not None:
        out.append(SystemRecord("cpu", "cpu_total", sr.IO_WAIT, io_wait, node, ts))
    for name, value in (gpus or {}).items():
        out.append(SystemRecord("gpu", name, sr.GPU_UTILIZATION, value, node, ts))
    for name, value in (gpu_memory or {}).items():
        out.append(SystemRecord("gpu", name, sr.GPU_MEMORY_UTILIZATION, value, node, ts))
    return out


def system_file(samples: list[list[SystemRecord]]) -> list[SystemRecord]:
    return [r for s in samples for r in s]


def steps_file(
    durations_s: list[float], *, first_step: int = 0, start_s: float = 0.0, mode: str = "TRAIN"
) -> TraceFile:
    """A trace file with one step event per duration, back to back from ``start_s`` after ``T0``."""
    origin = int(T0 * 1e6)
    events, at = [], origin + int(start_s * 1e6)
    for i, d in enumerate(durations_s):
        dur = int(d * 1e6)
        events.append(
            TraceEvent(step_phase(mode), step_phase(mode), at, dur, args={"step_num": str(first_step + i)})
        )
        at += dur
    return TraceFile(origin, tuple(events))

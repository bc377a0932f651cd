"""smdebug 1.0.34's profiler readers read what the hook's profiler really wrote, event for event.

The format's own oracle test writes hand-made records; this one trains (PyTorch, in the test venv: the
smdebug venv has no torch) with profiling on, then smdebug's ``LocalSystemMetricsReader`` and
``LocalAlgorithmMetricsReader`` read the files from the smdebug venv.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from smdebug_runner import run_smdebug

from tornasole.profiler.format import system_records, trace_events
from tornasole.profiler.sampling.config import ProfilerConfig

torch = pytest.importorskip("torch")


def test_smdebug_reads_the_hooks_system_metrics_and_step_events(tmp_path: Path) -> None:
    from torch import nn

    import tornasole.pytorch as ts

    began = time.time()
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    config = ProfilerConfig(interval_ms=50, rotate_file_close_interval_s=1.0)
    hook = ts.Hook(str(tmp_path / "trial"), profiler=config)
    hook.register_module(model)
    hook.register_optimizer(opt)
    hook.set_mode(ts.modes.TRAIN)
    for _ in range(40):  # about 2 s: more than one file of each kind
        loss = model(torch.randn(16, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.05)
    hook.close()
    root = tmp_path / "trial" / "profiler-output"
    system_files = sorted((root / "system").rglob("*.json"))
    trace_files = sorted((root / "framework").rglob("*.json"))
    assert len(system_files) >= 2
    assert len(trace_files) >= 2
    records = [r for f in system_files for r in system_records.decode_records(f.read_text())]
    events = [e for f in trace_files for e in trace_events.decode_trace_file(f.read_text()).events]

    result = run_smdebug(
        """
        from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader
        from smdebug.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader
        from smdebug.profiler.utils import TimeUnits
        system = LocalSystemMetricsReader(INPUT["root"]).get_events(
            INPUT["begin"] - 5, INPUT["end"] + 5, unit=TimeUnits.SECONDS)
        reader = LocalAlgorithmMetricsReader(INPUT["root"])
        trace = reader.get_events(int((INPUT["begin"] - 5) * 10**6), int((INPUT["end"] + 5) * 10**6))
        emit({
            "system": sorted([e.type, e.name, e.dimension, e.value, e.node_id, e.timestamp] for e in system),
            "trace": sorted([e.event_phase, e.event_name, e.start_time, e.duration, e.event_args]
                            for e in trace if e.phase == "X"),
        })
        """,
        {"root": str(root), "begin": began, "end": time.time()},
    )
    expected_system = sorted([r.type, r.name, r.dimension, r.value, r.node_id, r.timestamp] for r in records)
    assert result.data["system"] == expected_system
    expected_trace = sorted([e.phase, e.name, e.start_us, e.duration_us, dict(e.args)] for e in events)
    assert result.data["trace"] == expected_trace
    phases = {row[0] for row in result.data["trace"]}
    assert {
        trace_events.step_phase("TRAIN"),
        trace_events.FORWARD,
        trace_events.BACKWARD,
        trace_events.OPTIMIZER,
    } <= phases
    steps = [row for row in result.data["trace"] if row[0] == trace_events.step_phase("TRAIN")]
    assert sorted(int(row[4]["step_num"]) for row in steps) == list(range(40))

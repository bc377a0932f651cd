"""The PyTorch hook's profiler: step and phase events in order, system metrics, ranks, torch.compile.

The compile test follows ``test_pytorch_compile_statistics.py``: dynamo's own counters with and without the
profiling hook, and the ``fail_on_recompile`` stance after the first step.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
import torch
import torch._dynamo
from torch import nn
from torch._dynamo.utils import counters
from torch.utils.data import DataLoader, TensorDataset

import tornasole.pytorch as ts
from tests.frameworks.pytorch_lm import TinyLM, lm_batch
from tornasole.exceptions import ConfigurationError
from tornasole.profiler.format import paths, system_records, trace_events
from tornasole.profiler.sampling.config import ProfilerConfig

STEPS = 6
TRAIN = trace_events.step_phase("TRAIN")


def _events(root: Path) -> list[trace_events.TraceEvent]:
    files = sorted((root / "framework").rglob("*.json"))
    assert files, f"no trace file under {root}"
    events = []
    for file in files:
        assert paths.parse_framework_file_name(str(file)) is not None
        events.extend(trace_events.decode_trace_file(file.read_text(), source=str(file)).events)
    return events


def _until_sampled(hook: ts.Hook, after_s: float = 0.1) -> None:
    """Wait until the profiler thread has opened its samplers (its first /proc reading follows at once),
    then ``after_s``: the last reading at close is then a whole interval later. Six tiny steps can end
    before the thread first runs on a loaded machine, and a first reading alone gives no utilisation."""
    deadline = time.monotonic() + 10
    while hook.profiler_recorder._samplers is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(after_s)


def _train(out: Path, *, profiler: object, steps: int = STEPS, sampled: bool = False) -> ts.Hook:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    hook = ts.Hook(str(out), profiler=profiler)
    hook.register_module(model)
    hook.register_optimizer(opt)
    hook.set_mode(ts.modes.TRAIN)
    data = TensorDataset(torch.randn(8 * steps, 8), torch.randn(8 * steps, 1))
    for x, y in DataLoader(data, batch_size=8):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if sampled:
        _until_sampled(hook)
    hook.close()
    return hook


def test_each_step_holds_its_phases_in_order(tmp_path: Path) -> None:
    hook = _train(tmp_path, profiler=ProfilerConfig(interval_ms=50), sampled=True)
    events = _events(tmp_path / "profiler-output")
    steps = [e for e in events if e.phase == TRAIN]
    assert [e.args["step_num"] for e in steps] == [str(i) for i in range(STEPS)]
    assert all(a.end_us <= b.start_us for a, b in zip(steps, steps[1:]))
    for step in steps:
        inside = {
            e.phase: e for e in events if e.args.get("step_num") == step.args["step_num"] and e.phase != TRAIN
        }
        forward, backward, optimizer = (
            inside[trace_events.FORWARD],
            inside[trace_events.BACKWARD],
            inside[trace_events.OPTIMIZER],
        )
        assert forward.name == "Sequential"
        assert optimizer.name == "SGD.step"
        assert step.start_us <= forward.start_us < forward.end_us
        assert backward.start_us == forward.end_us  # the backward pass starts where the forward ended
        assert backward.end_us <= optimizer.start_us < optimizer.end_us == step.end_us
    loads = [e for e in events if e.phase == trace_events.DATALOADER]
    # one batch each step after the first (loaded before the profiler started) and the loader's end
    assert len(loads) >= STEPS - 1
    for load in loads:
        assert not any(s.start_us < load.start_us < s.end_us for s in steps)  # between steps, not in one
    # the system sampler wrote too, under the same root, for this machine
    system = sorted((tmp_path / "profiler-output" / "system").rglob("*.json"))
    records = [r for f in system for r in system_records.decode_records(f.read_text())]
    assert {r.node_id for r in records} == {"algo-1"}
    assert any(r.dimension == system_records.CPU_UTILIZATION for r in records)
    assert hook.profiler_recorder.events_dropped == 0


def test_each_rank_writes_its_own_trace_files(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    _train(tmp_path, profiler=True, steps=2)
    names = [paths.parse_framework_file_name(str(f)) for f in (tmp_path / "profiler-output").rglob("*.json")]
    assert {n.node_id for n in names} == {paths.framework_node_id(1, socket.gethostname())}
    assert not (tmp_path / "profiler-output" / "system").exists()  # local rank 0 samples this machine


def test_register_optimizer_still_refuses_without_statistics_or_profiling(tmp_path: Path) -> None:
    hook = ts.Hook(str(tmp_path), profiler=False)
    with pytest.raises(ConfigurationError, match="not in statistics mode"):
        hook.register_optimizer(torch.optim.SGD([nn.Parameter(torch.ones(1))], lr=0.1))
    hook.close()


def _compiled(out: Path | None, *, in_place: bool) -> dict[str, int]:
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = TinyLM()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    hook = None
    if out is not None:
        hook = ts.Hook(str(out), profiler=ProfilerConfig(interval_ms=50))
        hook.register_module(model)
        hook.register_loss(loss_fn)
        hook.register_optimizer(opt)
    run = model
    if in_place:
        model.compile(backend="aot_eager")
    else:
        run = torch.compile(model, backend="aot_eager")
    for step in range(4):
        tokens, targets = lm_batch(step)
        with torch.compiler.set_stance("fail_on_recompile" if step else "default"):
            loss = loss_fn(run(tokens).flatten(0, 1), targets.flatten())
            loss.backward()
        opt.step()
        opt.zero_grad()
    if hook is not None:
        hook.close()
    result = {
        "graph_breaks": sum(counters["graph_break"].values()),
        "unique_graphs": counters["stats"]["unique_graphs"],
        "frames": counters["frames"]["total"],
    }
    torch._dynamo.reset()
    return result


@pytest.mark.parametrize("in_place", [False, True], ids=["torch.compile(model)", "model.compile()"])
def test_profiling_adds_no_graph_break_and_no_graph(tmp_path: Path, in_place: bool) -> None:
    without = _compiled(None, in_place=in_place)
    with_profiler = _compiled(tmp_path, in_place=in_place)
    assert without["graph_breaks"] == 0
    assert with_profiler == without
    events = _events(tmp_path / "profiler-output")
    steps = [e for e in events if e.phase == trace_events.step_phase("GLOBAL")]
    assert [e.args["step_num"] for e in steps] == ["0", "1", "2", "3"]
    for phase in (trace_events.FORWARD, trace_events.BACKWARD, trace_events.OPTIMIZER):
        assert sorted(e.args["step_num"] for e in events if e.phase == phase) == ["0", "1", "2", "3"], phase


def test_sagemakers_profilerconfig_turns_it_on_without_code(tmp_path: Path, monkeypatch) -> None:
    local = tmp_path / "opt-ml-output-profiler"
    config = tmp_path / "profilerconfig.json"
    config.write_text(
        '{"ProfilingIntervalInMilliseconds": 100, "ProfilingParameters": '
        f'{{"ProfilerEnabled": "true", "LocalPath": "{local}", "RotateFileCloseIntervalInSeconds": "5"}}}}'
    )
    monkeypatch.delenv("TORNASOLE_PROFILER", raising=False)
    monkeypatch.setenv("SMPROFILER_CONFIG_PATH", str(config))
    hook = _train(tmp_path / "trial", profiler=None, steps=3)
    assert hook.profiler_config.interval_ms == 100
    assert hook.profiler_output_path == str(local)
    steps = [e for e in _events(local) if e.phase == TRAIN]
    assert [e.args["step_num"] for e in steps] == ["0", "1", "2"]
    assert not (tmp_path / "trial" / "profiler-output").exists()


def test_the_environment_variable_turns_it_on(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TORNASOLE_PROFILER", '{"interval_ms": 100, "system_metrics": false}')
    hook = _train(tmp_path, profiler=None, steps=2)
    assert hook.profiler_config.interval_ms == 100
    assert len([e for e in _events(tmp_path / "profiler-output") if e.phase == TRAIN]) == 2
    assert not (tmp_path / "profiler-output" / "system").exists()

"""The benchmarks' own contracts: each runnable script is described in bench/README.md, takes its
arguments as its RESULTS.md command gives them, and reports what its docstring says it measures."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_runnable_bench_script_is_described_in_bench_readme() -> None:
    readme = (BENCH / "README.md").read_text()
    runnable = [p for p in BENCH.rglob("*.py") if 'if __name__ == "__main__"' in p.read_text()]
    assert len(runnable) >= 10
    missing = [str(p.relative_to(BENCH)) for p in runnable if p.name not in readme]
    assert not missing, f"bench/README.md does not say what these measure: {missing}"


def test_report_bench_help_prints_usage_without_running(monkeypatch, capsys) -> None:
    module = _load(BENCH / "report_bench.py")

    def not_run(*_args, **_kwargs):
        raise AssertionError("--help wrote a trial: the benchmark ran")

    monkeypatch.setattr(module, "write_report_trial", not_run)
    monkeypatch.setattr(sys, "argv", ["report_bench.py", "--help"])
    with pytest.raises(SystemExit) as exit_info:
        module.main()
    assert exit_info.value.code == 0
    assert "--skip-trial" in capsys.readouterr().out


def test_report_bench_rejects_an_unknown_flag(monkeypatch) -> None:
    module = _load(BENCH / "report_bench.py")
    monkeypatch.setattr(module, "write_report_trial", lambda *a, **k: pytest.fail("ran with a bad flag"))
    monkeypatch.setattr(sys, "argv", ["report_bench.py", "1000", "--skip-trials"])
    with pytest.raises(SystemExit) as exit_info:
        module.main()
    assert exit_info.value.code == 2


def test_profiler_callback_cost_is_also_a_share_of_the_training_threads_cpu() -> None:
    pytest.importorskip("torch")
    module = _load(BENCH / "profiler_overhead.py")
    cost = module.callback_cost(steps=40, width=8)
    assert cost["calls_per_step"] == pytest.approx(5, abs=0.2)
    assert 0 < cost["cpu_step_us"] <= cost["step_us"] * 1.01  # one thread's CPU never exceeds wall time
    assert cost["net_cpu_pct"] == pytest.approx(100 * cost["net_us_per_step"] / cost["cpu_step_us"])
    assert cost["net_cpu_pct"] >= cost["net_pct"] * 0.99  # the share a loaded machine's wall time hides


def test_statistics_overhead_keeps_the_callers_pythonpath_for_its_worker(monkeypatch, capsys) -> None:
    """On the CUDA machine google-crc32c and protobuf travel in a `pip --target` folder on PYTHONPATH: the
    tornasole worker must get `layers` in front of it, not instead of it (else no google_crc32c)."""
    module = _load(BENCH / "statistics_overhead.py")
    monkeypatch.setenv("PYTHONPATH", "/deps")
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append((cmd, kwargs["env"]))
        kinds = cmd[cmd.index("--worker") + 1].split(",")
        runs = {k: {"base": [[1.0, 1.0]], "hook": [[1.1, 1.2]]} for k in kinds}
        return module.subprocess.CompletedProcess(cmd, 0, stdout=json.dumps(runs) + "\n", stderr="")

    monkeypatch.setattr(module.subprocess, "run", fake_run)
    argv = ["statistics_overhead.py", "--steps", "1", "--repeats", "1", "--smdebug-path", "/smd"]
    monkeypatch.setattr(sys, "argv", argv)
    module.main()
    ours, smdebug = calls
    assert ours[1]["PYTHONPATH"] == f"{REPO / 'layers'}{os.pathsep}/deps"
    assert smdebug[1]["PYTHONPATH"] == "/smd"  # smdebug's folder alone: its protobuf 3.20 and numpy 2.2 first
    assert "+10.0%" in capsys.readouterr().out  # the stats row: 1.1 s against 1.0 s


def test_statistics_overhead_puts_no_empty_entry_on_the_workers_path(monkeypatch) -> None:
    module = _load(BENCH / "statistics_overhead.py")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert module._ahead_of_pythonpath("layers") == "layers"  # "layers:" would add the working directory

"""The report reads profiler files through the profiler's readers: their size cap, their file names
(SageMaker's older trace names included) and their errors, each naming the file."""

from __future__ import annotations

from pathlib import Path

from report_trials import write_report_trial

from tornasole.reports.profiler_data import load_profiler_data


def _files(trial: Path, kind: str) -> list[Path]:
    return sorted(p for p in (trial / "profiler-output" / kind).rglob("*.json") if p.is_file())


def test_a_file_over_the_readers_cap_is_named_and_not_read(tmp_path: Path) -> None:
    trial = write_report_trial(str(tmp_path / "run"), 40)
    first = _files(tmp_path / "run", "system")[0]
    # a second, one-line file a minute later: under any cap that refuses the first
    one_line = first.read_text().splitlines()[0] + "\n"
    first.with_name(f"{int(first.name.split('.')[0]) + 60}.algo-1.json").write_text(one_line)
    system = _files(tmp_path / "run", "system")
    biggest = max(system, key=lambda p: p.stat().st_size)
    cap = biggest.stat().st_size - 1
    whole = load_profiler_data(trial)
    capped = load_profiler_data(trial, max_file_bytes=cap)
    assert whole is not None
    assert capped is not None
    assert not whole.problems
    too_big = [p for p in system + _files(tmp_path / "run", "framework") if p.stat().st_size > cap]
    assert biggest in too_big
    assert len(capped.problems) == len(too_big)
    for path, text in zip(too_big, sorted(capped.problems, key=lambda t: "framework" in t)):
        assert text.startswith(str(path))
        assert f"over {cap} bytes" in text
    assert capped.system_files == whole.system_files  # listed and counted; its samples are left out
    samples = sum(len(v) for v in capped.utilisation.values())
    assert 0 < samples < sum(len(v) for v in whole.utilisation.values())


def test_a_trace_file_with_sagemakers_older_name_is_read(tmp_path: Path) -> None:
    """``<end us>_<pid>_<more>_pythontimeline.json`` (older smdebug and SageMaker): the readers take it
    (smdebug splits on ``_``); a report that lists with the writer's own name rule skipped its steps."""
    trial = write_report_trial(str(tmp_path / "run"), 40)
    before = load_profiler_data(trial)
    assert before is not None
    assert before.steps
    trace = _files(tmp_path / "run", "framework")
    assert len(trace) == 1
    end_us = trace[0].name.split("_", 1)[0]
    trace[0].rename(trace[0].with_name(f"{end_us}_4487_0000_pythontimeline.json"))
    after = load_profiler_data(trial)
    assert after is not None
    assert not after.problems
    assert [(s.step, s.mode, s.duration_ms) for s in after.steps] == [
        (s.step, s.mode, s.duration_ms) for s in before.steps
    ]
    assert {s.node for s in after.steps} == {"4487"}

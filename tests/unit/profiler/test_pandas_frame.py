"""PandasFrame gives smdebug's data frames (same columns, same rows) on files smdebug wrote.

pandas is the 'notebook' extra: requirements/dev.txt installs it for these tests.
"""

from __future__ import annotations

import json
import sys

import pytest
from profiler_fixture import EXPECTED, ROOT, upload_tree

from tornasole.extras import MissingExtraError
from tornasole.profiler.analysis import PandasFrame

PANDAS = EXPECTED["pandas"]
# smdebug's tid is a hash of a string (it changes with PYTHONHASHSEED) and its pid the file's own pid
# number; both are per-process labels, so the comparison leaves them out.
UNSTABLE = {"tid", "pid"}


def _rows(frame, columns: list[str]) -> list:
    keep = [c for c in columns if c not in UNSTABLE]
    rows = json.loads(frame[keep].to_json(orient="values"))
    return sorted(rows, key=json.dumps)


def _expected(rows: list, columns: list[str]) -> list:
    keep = [i for i, c in enumerate(columns) if c not in UNSTABLE]
    return sorted(([row[i] for i in keep] for row in rows), key=json.dumps)


@pytest.fixture(scope="module")
def frame() -> PandasFrame:
    return PandasFrame(str(ROOT))


def test_all_system_metrics_are_smdebugs_frame(frame: PandasFrame) -> None:
    system = frame.get_all_system_metrics()
    assert list(system.columns) == PANDAS["system_columns"]
    assert system.shape == (216, 7)
    columns = PANDAS["system_columns"]
    assert _rows(system, columns) == _expected(PANDAS["system_rows"], columns)


def test_all_framework_metrics_are_smdebugs_frame(frame: PandasFrame) -> None:
    framework = frame.get_all_framework_metrics()
    assert list(framework.columns) == PANDAS["framework_columns"]
    assert framework.shape == (88, 11)
    columns = PANDAS["framework_columns"]
    assert _rows(framework, columns) == _expected(PANDAS["framework_rows"], columns)


def test_data_by_step_keeps_those_steps_and_the_samples_within_them(frame: PandasFrame) -> None:
    system, framework = frame.get_profiler_data_by_step(2, 3)
    assert len(framework) == PANDAS["by_step_rows"]
    assert sorted(framework["step"].unique()) == PANDAS["by_step_steps"]
    assert framework.groupby("step").ngroups == 2
    start, end = framework["start_time_us"].min(), framework["end_time_us"].max()
    assert system["timestamp_us"].between(start, end).all()
    assert frame.get_framework_metrics_by_step(2, 3).equals(framework)


def test_selected_metrics_and_time_windows(frame: PandasFrame) -> None:
    gpu = frame.get_all_system_metrics(selected_system_metrics=["gpu0"])
    assert set(gpu["system_metric"]) == {"gpu0"}
    assert len(gpu) == 48
    forward = frame.get_all_framework_metrics(selected_framework_metrics=["Forward"])
    assert set(forward["process"]) == {"Forward"}
    assert not forward.empty
    start = EXPECTED["first_system_us"]
    system, framework = frame.get_profiler_data_by_time(start, start + 1_000_000)
    # both ends count: algo-1 samples at +0, +0.5 and +1.0 s, algo-2 at +0.01 and +0.51 s; 9 rows each
    assert len(system) == 45
    assert framework.empty  # the steps begin about three seconds after the first system file


def test_a_small_scan_interval_reads_in_windows_and_keeps_each_event_once() -> None:
    whole = PandasFrame(str(ROOT)).get_all_framework_metrics()
    # 30 s windows over the ~6.5 min the reading spans (three minutes of buffer on each side)
    windowed = PandasFrame(str(ROOT), scan_interval=30_000_000).get_all_framework_metrics()
    assert len(windowed) == len(whole) == 88


def test_correlations_over_the_timestamp_column(frame: PandasFrame) -> None:
    framework = frame.get_all_framework_metrics()
    steps = framework[framework["process"] == "Step:ModeKeys.TRAIN"].sort_values("start_time")
    phases, detailed, training = frame.get_framework_metrics_by_timesteps(
        [steps.iloc[3]["start_time"], steps.iloc[5]["start_time"]]
    )
    assert training
    assert all("Step" in key for key in training)
    assert max(phases.values()) == 1.0
    phases, detailed = frame.get_framework_metrics_by_begin_and_end_timesteps(
        list(steps["start_time"][:4]), list(steps["end_time"][:4])
    )
    assert set(phases) == {"DataLoaderIter", "Forward", "Backward(post-forward)", "Optimizer"}
    assert max(phases.values()) == 1.0
    assert max(detailed.values()) == 1.0


def test_dataloader_frame_has_smdebugs_columns(frame: PandasFrame) -> None:
    loader = frame.get_all_dataloader_metrics(selected_framework_metrics=["DataLoaderIter"])
    assert list(loader.columns)[4:7] == ["duration_us", "pid", "framework_metric"]
    assert set(loader["process"]) == {"DataLoaderIter"}
    assert len(loader) == 18
    assert (loader["duration_us"] == 4000).all()


def test_pandas_frame_on_s3_is_the_same(s3_bucket: str) -> None:
    uri = upload_tree(ROOT, s3_bucket, "job")
    frame = PandasFrame(uri.removesuffix("/profiler-output"))
    assert frame.path == uri
    columns = PANDAS["system_columns"]
    assert _rows(frame.get_all_system_metrics(), columns) == _expected(PANDAS["system_rows"], columns)


def test_without_pandas_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "pandas" or m.startswith("pandas.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'tornasole\[notebook\]'"):
        PandasFrame(str(ROOT))

"""smdebug's framework-reader and pandas checks (its test_algorithm_metric_readers.py, test_pandas_frames.py,
and ProfilerTrial's end of data), on trace files smdebug's TimelineFileWriter wrote."""

from __future__ import annotations

import importlib

import pytest
from profiler_fixture import EXPECTED, ROOT, upload_tree

from tornasole.profiler.format import paths

FIRST = 0
LAST = 4 * 10**15


@pytest.mark.parametrize("use_in_memory_cache", [True, False])
def test_local_reader_counts_events_and_names_nodes(smdebug, use_in_memory_cache: bool) -> None:
    reader = smdebug.algorithm_metrics_reader.LocalAlgorithmMetricsReader(
        str(ROOT), use_in_memory_cache=use_in_memory_cache
    )
    events = reader.get_events(FIRST, LAST)
    assert len(events) == 88
    assert {e.node_id for e in events} == {"algo-1-0", "algo-2-1"}
    step_query = next(q for q in EXPECTED["queries"] if q["method"] == "get_events_by_step")
    assert len(reader.get_events_by_step(*step_query["args"])) == len(step_query["events"]) == 30
    suffix = smdebug.profiler_constants.MODELTIMELINE_SUFFIX
    assert reader.get_events(FIRST, LAST, file_suffix_filter=[suffix]) == []


def test_s3_reader_reads_the_same_events(smdebug, s3_bucket: str) -> None:
    uri = upload_tree(ROOT, s3_bucket, "resources/model_timeline_traces")
    reader = smdebug.algorithm_metrics_reader.S3AlgorithmMetricsReader(uri)
    events = reader.get_events(FIRST, LAST)
    assert len(events) == 88
    assert reader.get_timestamp_of_latest_available_file() == EXPECTED["latest_framework_us"]


def test_pandas_frames_have_smdebugs_shapes(smdebug) -> None:
    pandas_frame = importlib.import_module("smdebug.profiler.analysis.utils.profiler_data_to_pandas")
    frame = pandas_frame.PandasFrame(str(ROOT), scan_interval=50_000_000_000)
    assert frame.get_all_system_metrics().shape == (216, 7)
    assert frame.get_all_framework_metrics().shape == (88, 11)
    system, framework = frame.get_profiler_data_by_time(
        EXPECTED["first_system_us"], EXPECTED["latest_framework_us"] + 10**6
    )
    assert system.shape[1] == 7
    assert framework.shape == (88, 11)
    _, by_step = pandas_frame.PandasFrame(str(ROOT)).get_profiler_data_by_step(2, 3)
    assert not by_step.empty
    assert by_step.groupby("step").ngroups == 2
    assert by_step.shape == (EXPECTED["pandas"]["by_step_rows"], 11)


def test_profiler_trial_raises_no_more_profiler_data_after_the_end(smdebug, tmp_path) -> None:
    import shutil

    shutil.copytree(ROOT, tmp_path / "profiler-output")
    (tmp_path / paths.END_MARKER).write_text("")
    trial = smdebug.profiler_trial.ProfilerTrial(
        "job", str(tmp_path / "profiler-output"), str(tmp_path / "out")
    )
    latest = trial.get_latest_timestamp()
    trial.wait_for_data(latest, latest - 1)  # data exists after start: returns
    with pytest.raises(smdebug.exceptions.NoMoreProfilerData):
        trial.wait_for_data(latest + 10**6, latest)

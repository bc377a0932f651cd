"""The profiler readers answer as smdebug 1.0.34's do, on files smdebug wrote, locally and on S3 (moto)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from profiler_fixture import EXPECTED, ROOT, query_id, run_query, upload_tree

from tornasole.exceptions import ConfigurationError, FormatError
from tornasole.profiler.format import paths, system_records, trace_events
from tornasole.profiler.format.system_records import SystemRecord
from tornasole.profiler.readers import (
    LocalAlgorithmMetricsReader,
    LocalSystemMetricsReader,
    S3AlgorithmMetricsReader,
    S3SystemMetricsReader,
    TimeUnits,
)
from tornasole.profiler.readers.bounded_read import ProfilerFileTooLarge

QUERIES = EXPECTED["queries"]


@pytest.fixture(scope="module")
def local_readers() -> dict:
    return {
        "system": LocalSystemMetricsReader(str(ROOT)),
        "framework": LocalAlgorithmMetricsReader(str(ROOT)),
    }


@pytest.mark.parametrize("query", QUERIES, ids=query_id)
def test_local_readers_answer_each_query_as_smdebug(local_readers: dict, query: dict) -> None:
    assert run_query(local_readers, query) == query["events"]


def test_the_fixture_exercises_non_empty_and_empty_answers() -> None:
    sizes = [len(q["events"]) for q in QUERIES]
    assert min(sizes) == 0
    assert max(sizes) >= 88
    assert sum(1 for s in sizes if s) >= 9


@pytest.mark.parametrize("cache", [True, False])
def test_s3_readers_answer_every_query_as_smdebug(s3_bucket: str, cache: bool) -> None:
    uri = upload_tree(ROOT, s3_bucket, "job-1")
    readers = {
        "system": S3SystemMetricsReader(uri, use_in_memory_cache=cache),
        "framework": S3AlgorithmMetricsReader(uri, use_in_memory_cache=cache),
    }
    for query in QUERIES:
        assert run_query(readers, query) == query["events"], query_id(query)
    assert readers["system"].get_timestamp_of_first_available_file() == EXPECTED["first_system_us"]
    assert readers["system"].get_timestamp_of_latest_available_file() == EXPECTED["latest_system_us"]
    assert readers["framework"].get_timestamp_of_latest_available_file() == EXPECTED["latest_framework_us"]
    # smdebug's listing restarts after a key (bucket-less, as its tests read it)
    assert readers["system"]._startAfter_prefix.startswith("job-1/profiler-output/system/incremental/")


def test_first_and_latest_file_times_are_smdebugs(local_readers: dict) -> None:
    assert local_readers["system"].get_timestamp_of_first_available_file() == EXPECTED["first_system_us"]
    assert local_readers["system"].get_timestamp_of_latest_available_file() == EXPECTED["latest_system_us"]
    assert (
        local_readers["framework"].get_timestamp_of_latest_available_file() == EXPECTED["latest_framework_us"]
    )


def test_node_ids_are_in_smdebugs_display_order(local_readers: dict) -> None:
    events = local_readers["framework"].get_events(0, 4 * 10**15)
    assert {e.node_id for e in events} == {"algo-1-0", "algo-2-1"}
    steps = [e for e in events if e.event_phase == trace_events.step_phase("TRAIN")]
    assert steps
    assert all(e.end_time == e.start_time + e.duration and e.event_args["step_num"].isdigit() for e in steps)


def _write_system(root: Path, start: int, node: str = "algo-1", count: int = 4) -> list[SystemRecord]:
    records = [
        SystemRecord("cpu", "cpu0", system_records.CPU_UTILIZATION, float(i), node, start + i * 0.5)
        for i in range(count)
    ]
    target = root / paths.system_file_name(start, node)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(system_records.encode_records(records))
    return records


def test_a_live_job_s_new_files_are_seen_on_the_next_query(tmp_path: Path) -> None:
    root = tmp_path / "profiler-output"
    _write_system(root, 1_700_000_000)
    reader = LocalSystemMetricsReader(str(root))
    assert len(reader.get_events(1_699_999_000, 1_700_009_000, unit=TimeUnits.SECONDS)) == 4
    _write_system(root, 1_700_000_060)
    _write_system(root, 1_700_000_060, node="algo-2")
    assert len(reader.get_events(1_699_999_000, 1_700_009_000, unit=TimeUnits.SECONDS)) == 12
    assert reader.get_timestamp_of_latest_available_file() == 1_700_000_060 * 10**6


def test_a_late_file_within_the_trailing_duration_is_still_listed(s3_bucket: str, tmp_path: Path) -> None:
    root = tmp_path / "profiler-output"
    for minute in range(4):
        _write_system(root, 1_700_000_000 + 60 * minute)
    uri = upload_tree(root, s3_bucket, "live")
    reader = S3SystemMetricsReader(uri)
    assert len(reader.get_events(1_699_000_000, 1_701_000_000, unit=TimeUnits.SECONDS)) == 16
    # another node's file for minute 2 lands after the first listing
    late = tmp_path / "late" / "profiler-output"
    _write_system(late, 1_700_000_120, node="algo-2")
    upload_tree(late, s3_bucket, "live")
    assert len(reader.get_events(1_699_000_000, 1_701_000_000, unit=TimeUnits.SECONDS)) == 20


def test_sagemaker_file_names_without_hour_folders_and_with_extra_fields_are_read(tmp_path: Path) -> None:
    root = tmp_path / "out"
    flat = root / "system" / "incremental" / "1591160699.algo-1.json"
    flat.parent.mkdir(parents=True)
    flat.write_text(
        system_records.encode_records(
            [SystemRecord("gpu", "gpu0", system_records.GPU_UTILIZATION, 7.0, "algo-1", 1591160699.25)]
        )
    )
    trace = root / "framework" / "pevents" / "2020051923" / "1589930988000000_4487_0000_pythontimeline.json"
    trace.parent.mkdir(parents=True)
    origin = 1589930987000000
    trace.write_text(
        trace_events.encode_trace_file(
            origin, [trace_events.TraceEvent("Forward", "conv1", origin + 10, 5, args={"step_num": "1"})]
        )
    )
    system = LocalSystemMetricsReader(str(root)).get_events(1591160690, 1591160700, unit=TimeUnits.SECONDS)
    assert [(e.name, e.value) for e in system] == [("gpu0", 7.0)]
    framework = LocalAlgorithmMetricsReader(str(root)).get_events(origin, origin + 100)
    assert [(e.node_id, e.event_name, e.start_time) for e in framework] == [("4487", "conv1", origin + 10)]


def test_a_file_over_the_cap_is_refused_naming_it(tmp_path: Path) -> None:
    root = tmp_path / "profiler-output"
    _write_system(root, 1_700_000_000, count=200)
    reader = LocalSystemMetricsReader(str(root), max_file_bytes=1000)
    with pytest.raises(ProfilerFileTooLarge, match=r"1700000000\.algo-1\.json.*over 1000 bytes"):
        reader.get_events(1_699_000_000, 1_701_000_000, unit=TimeUnits.SECONDS)
    assert isinstance(ProfilerFileTooLarge("x"), FormatError)


def test_a_corrupt_trace_file_is_an_error_naming_it(tmp_path: Path) -> None:
    shutil.copytree(ROOT, tmp_path / "p")
    victim = sorted((tmp_path / "p" / "framework").rglob("*.json"))[0]
    victim.write_text('[{"name": "process_name", "ph": "M", "pid": 0, "args": {}},\n{"name": "x", "ph": "X"')
    reader = LocalAlgorithmMetricsReader(str(tmp_path / "p"))
    with pytest.raises(FormatError, match=victim.name):
        reader.get_events(0, 4 * 10**15)


@pytest.mark.parametrize("kind", ["system", "framework"])
def test_json_nested_past_the_recursion_limit_is_an_error_naming_the_file(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "profiler-output"
    if kind == "system":
        target = root / paths.system_file_name(1_700_000_000)
        text, reader = '{"Type": ' * 100_000 + "\n", LocalSystemMetricsReader
    else:
        target = root / paths.framework_file_name(1_700_000_000_000_000, "0-algo-1")
        text, reader = "[" * 100_000, LocalAlgorithmMetricsReader
    target.parent.mkdir(parents=True)
    target.write_text(text + "\n" + text)  # not the last line: a cut-short last line is dropped
    with pytest.raises(FormatError, match=f"{target.name}.*nested too deeply"):
        reader(str(root)).get_events(0, 4 * 10**15)


def test_system_file_last_line_cut_short_is_dropped_a_middle_one_is_an_error(tmp_path: Path) -> None:
    root = tmp_path / "profiler-output"
    records = _write_system(root, 1_700_000_000)
    target = root / paths.system_file_name(1_700_000_000)
    text = target.read_text()
    target.write_text(text + '{"Type": "cpu", "Name": "cpu0", "Dimen')
    reader = LocalSystemMetricsReader(str(root))
    assert len(reader.get_events(1_699_000_000, 1_701_000_000, unit=TimeUnits.SECONDS)) == len(records)
    target.write_text('{"Type": "cpu", oops\n' + text)
    with pytest.raises(FormatError, match=r"1700000000\.algo-1\.json line 1"):
        reader.get_events(1_699_000_000, 1_701_000_000, unit=TimeUnits.SECONDS)


def test_in_memory_cache_keeps_events_between_queries_and_no_cache_rereads(tmp_path: Path) -> None:
    root = tmp_path / "profiler-output"
    _write_system(root, 1_700_000_000)
    cached = LocalSystemMetricsReader(str(root), use_in_memory_cache=True)
    fresh = LocalSystemMetricsReader(str(root))
    window = (1_699_000_000, 1_701_000_000)
    assert len(cached.get_events(*window, unit=TimeUnits.SECONDS)) == 4
    assert len(fresh.get_events(*window, unit=TimeUnits.SECONDS)) == 4
    (root / paths.system_file_name(1_700_000_000)).write_text("")  # the cached reader does not read again
    assert len(cached.get_events(*window, unit=TimeUnits.SECONDS)) == 4
    assert fresh.get_events(*window, unit=TimeUnits.SECONDS) == []


def test_readers_refuse_the_wrong_kind_of_path_and_bad_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigurationError, match="S3SystemMetricsReader needs an S3 path"):
        S3SystemMetricsReader(str(tmp_path))
    with pytest.raises(ConfigurationError, match="use S3AlgorithmMetricsReader"):
        LocalAlgorithmMetricsReader("s3://bucket/job/profiler-output")
    monkeypatch.setenv("TIME_BUFFER_MICROSECONDS", "three minutes")
    reader = LocalSystemMetricsReader(str(tmp_path))
    with pytest.raises(ConfigurationError, match="TIME_BUFFER_MICROSECONDS"):
        reader.get_events(0, 1)
    with pytest.raises(ValueError, match="TimeUnits"):
        LocalSystemMetricsReader(str(tmp_path)).get_events(0, 1, unit="seconds")


def test_the_expected_file_is_smdebugs_json() -> None:
    assert json.loads(json.dumps(EXPECTED)) == EXPECTED

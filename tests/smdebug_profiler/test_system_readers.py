"""smdebug's system-metrics checks (its test_system_metric_reader.py, test_system_profiler_file_parser.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from profiler_fixture import EXPECTED, ROOT, upload_tree

from tornasole.profiler.format import paths, system_records
from tornasole.profiler.format.system_records import SystemRecord

T0 = 1_650_000_000


def _sagemaker_file(folder: Path, start: int, node: str = "algo-1") -> Path:
    """One minute of a SageMaker daemon's file: 2 cores + total CPU every 20 s, memory, 2 GPUs once."""
    rows = []
    for i in range(3):
        stamp = start + 20 * i + 0.25
        rows += [
            SystemRecord("cpu", f"cpu{c}", system_records.CPU_UTILIZATION, 10.0 * c + i, node, stamp)
            for c in range(2)
        ]
        rows.append(
            SystemRecord(
                "cpu", system_records.CPU_TOTAL, system_records.CPU_UTILIZATION, 5.0 + i, node, stamp
            )
        )
    rows.append(SystemRecord("memory", "MemoryUsedPercent", "MemoryUsedPercent", 41.5, node, start + 30.0))
    rows += [
        SystemRecord("gpu", f"gpu{g}", system_records.GPU_UTILIZATION, 90.0 - g, node, start + 59.5)
        for g in range(2)
    ]
    target = folder / f"{start}.{node}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(system_records.encode_records(rows))
    return target


@pytest.fixture
def sagemaker_root(tmp_path: Path) -> Path:
    """Three minutes of one node, in SageMaker's flat ``system/incremental/`` folder."""
    for minute in range(3):
        _sagemaker_file(tmp_path / "profiler-output" / "system" / "incremental", T0 + 60 * minute)
    return tmp_path / "profiler-output"


def test_parser_reads_a_file_and_filters_by_time_and_kind(smdebug, sagemaker_root: Path) -> None:
    events = smdebug.system_profiler_file_parser.ProfilerSystemEvents()
    events.read_events_from_file(str(sagemaker_root / "system" / "incremental" / f"{T0}.algo-1.json"))
    seconds = smdebug.utils.TimeUnits.SECONDS
    assert len(events.get_all_events()) == 12
    assert len(events.get_events_within_time_range(0, T0 + 60, unit=seconds)) == 12
    assert len(events.get_events_within_time_range(0, T0 + 60, seconds, "cpu")) == 9
    # the CPU rows at +0.25 s and +20.25 s, and memory at +30 s
    assert len(events.get_events_within_time_range(0, T0 + 40, unit=seconds)) == 3 * 2 + 1
    assert len(events.get_events_within_time_range(T0 + 50, 2 * T0, seconds, "gpu")) == 2
    assert events.get_events_within_time_range(0, 0, seconds, "gpu") == []


def test_parser_drops_a_cut_short_last_line(smdebug, sagemaker_root: Path) -> None:
    target = sagemaker_root / "system" / "incremental" / f"{T0}.algo-1.json"
    target.write_text(target.read_text() + '{"Type": "gpu", "Name": "gpu0", "Dimension": "GPUUtil')
    events = smdebug.system_profiler_file_parser.ProfilerSystemEvents()
    events.read_events_from_file(str(target))
    assert len(events.get_all_events()) == 12


def test_local_reader_counts_by_window_and_kind(smdebug, sagemaker_root: Path) -> None:
    reader = smdebug.system_metrics_reader.LocalSystemMetricsReader(str(sagemaker_root))
    seconds = smdebug.utils.TimeUnits.SECONDS
    assert len(reader.get_events(T0 - 1000, T0 + 1000, unit=seconds)) == 36
    assert len(reader.get_events(T0 - 1000, T0 + 1000, seconds, "cpu")) == 27
    assert len(reader.get_events(T0 - 1000, T0 + 59, seconds)) == 10
    assert len(reader.get_events(T0 + 120, T0 + 1000, seconds)) == 12


@pytest.mark.parametrize("use_in_memory_cache", [True, False])
def test_s3_reader_counts_and_restarts_listing_after_a_key(
    smdebug, s3_bucket: str, use_in_memory_cache: bool
) -> None:
    uri = upload_tree(ROOT, s3_bucket, "resources/trainingjob")
    reader = smdebug.system_metrics_reader.S3SystemMetricsReader(uri, use_in_memory_cache=use_in_memory_cache)
    seconds = smdebug.utils.TimeUnits.SECONDS
    first = EXPECTED["first_system_us"] // 10**6
    assert len(reader.get_events(first - 100, first + 100, unit=seconds)) == 216
    assert len(reader.get_events(first - 100, first + 100, seconds, "cpu")) == 96
    latest = EXPECTED["latest_system_us"] // 10**6
    folder = f"resources/trainingjob/profiler-output/system/incremental/{paths.hour_folder(first)}"
    # the newest file is under five minutes after the first: listing restarts after the first one
    assert latest - first < 300
    assert reader._startAfter_prefix == f"{folder}/{first}.algo-1.json"


def test_file_name_utilities(smdebug) -> None:
    name = "my-job/profiler-output/system/incremental/2022041505/1650000000.algo-3.json"
    assert smdebug.utils.get_node_id_from_system_profiler_filename(name) == "algo-3"
    assert smdebug.utils.get_utctimestamp_us_since_epoch_from_system_profiler_file(name) == 1650000000000000
    wrong = name.replace("algo-3", "node-3")
    assert smdebug.utils.get_utctimestamp_us_since_epoch_from_system_profiler_file(wrong) is None
    assert smdebug.utils.validate_system_profiler_file(name)
    assert not smdebug.utils.validate_system_profiler_file(wrong)
    trace = "x/framework/pevents/2022041505/1650000000123456_7-algo-1_pythontimeline.json"
    assert smdebug.utils.get_timestamp_from_tracefilename(trace) == 1650000000123456
    assert smdebug.utils.get_node_id_from_tracefilename(trace) == "7-algo-1"
    assert smdebug.profiler_constants.PYTHONTIMELINE_SUFFIX == "pythontimeline.json"

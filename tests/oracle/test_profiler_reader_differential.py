"""The same profiler files read by smdebug 1.0.34's readers and by ours give the same events.

The tree mixes what each side writes and what SageMaker leaves: the smdebug-written fixture's trace
files, trace files of our format for three nodes (with a model timeline beside the python ones, a
SageMaker name with an extra field, and several files per node), system files of our format in hour
folders and SageMaker's flat folder. Every window below is asked of both, locally and on S3 (moto).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from smdebug_runner import run_smdebug

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "profiler"))
from profiler_fixture import ROOT, upload_tree  # noqa: E402

from tornasole.profiler.format import paths, system_records, trace_events  # noqa: E402
from tornasole.profiler.format.system_records import SystemRecord  # noqa: E402
from tornasole.profiler.format.trace_events import TraceEvent  # noqa: E402
from tornasole.profiler.readers import (  # noqa: E402
    LocalAlgorithmMetricsReader,
    LocalSystemMetricsReader,
    S3AlgorithmMetricsReader,
    S3SystemMetricsReader,
    TimeUnits,
)

T0 = 1_700_000_000
STEP = trace_events.step_phase("TRAIN")


def _build(root: Path) -> None:
    shutil.copytree(ROOT, root)
    for rank in range(3):
        node = f"algo-{rank + 1}"
        for minute in range(3):
            start = T0 + 60 * minute
            records = [
                SystemRecord(kind, name, dim, float(i * (rank + 1)), node, start + i * 7.5 + rank * 0.1)
                for i in range(8)
                for kind, name, dim in (
                    ("cpu", "cpu0", system_records.CPU_UTILIZATION),
                    ("cpu", system_records.CPU_TOTAL, system_records.IO_WAIT),
                    ("gpu", "gpu0", system_records.GPU_UTILIZATION),
                    ("memory", "MemoryUsedPercent", system_records.MEMORY_USED_PERCENT),
                )
            ]
            name = paths.system_file_name(start, node)
            if minute == 2:  # SageMaker's flat folder
                name = f"{paths.SYSTEM_PREFIX}/{start}.{node}.json"
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(system_records.encode_records(records))
        origin = T0 * 1_000_000
        node_id = paths.framework_node_id(rank, f"algo-{rank + 1}")
        for part in range(3):
            events = []
            for step in range(part * 5, part * 5 + 5):
                begin = origin + step * 400_000 + rank * 1_000
                events += [
                    TraceEvent(STEP, STEP, begin, 350_000, args={"step_num": str(step)}),
                    TraceEvent(trace_events.DATALOADER, "DataLoaderIter", begin + 1_000, 20_000),
                    TraceEvent(
                        trace_events.FORWARD, "Net", begin + 30_000, 100_000, args={"step_num": str(step)}
                    ),
                    TraceEvent(trace_events.BACKWARD, "Net", begin + 140_000, 150_000),
                ]
            end = max(e.end_us for e in events)
            name = paths.framework_file_name(end, node_id)
            if rank == 2 and part == 0:  # an older writer's name: one more field before the kind
                name = name.replace(f"_{node_id}_", f"_{rank}_0000_")
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(trace_events.encode_trace_file(origin, events))
        detail = [
            TraceEvent("conv1", "conv1.forward", origin + 40_000 + rank, 5_000, args={"layer_name": "conv1"})
        ]
        name = paths.framework_file_name(detail[0].end_us, node_id, paths.MODEL_TIMELINE_SUFFIX)
        (root / name).write_text(trace_events.encode_trace_file(origin, detail))


FIXTURE_T0 = json.loads((ROOT.parent / "timeline.json").read_text())["t0"]
QUERIES = [
    ("system", [T0 - 100, T0 + 400], {"unit": "SECONDS"}),
    ("system", [T0 + 30, T0 + 70], {"unit": "SECONDS", "event_type": "gpu"}),
    ("system", [(T0 + 125) * 10**6, (T0 + 150) * 10**6], {}),
    ("system", [FIXTURE_T0 - 5, FIXTURE_T0 + 5], {"unit": "SECONDS"}),
    ("framework", [(T0 - 10) * 10**6, (T0 + 10) * 10**6], {}),
    ("framework", [T0 * 10**6 + 1_000_000, T0 * 10**6 + 1_200_000], {}),
    ("framework", [T0 * 1000 + 2_500, T0 * 1000 + 4_000], {"unit": "MILLISECONDS"}),
    ("framework", [(T0 - 10) * 10**6, (T0 + 10) * 10**6], {"file_suffix_filter": ["model_timeline.json"]}),
    ("framework", [(FIXTURE_T0 - 5) * 10**6, (FIXTURE_T0 + 5) * 10**6], {}),
]

SMDEBUG_SNIPPET = """
    import json
    from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader, S3SystemMetricsReader
    from smdebug.profiler.algorithm_metrics_reader import (
        LocalAlgorithmMetricsReader, S3AlgorithmMetricsReader)
    from smdebug.profiler.utils import TimeUnits
    root = INPUT["root"]
    s3 = root.startswith("s3://")
    readers = {
        "system": (S3SystemMetricsReader if s3 else LocalSystemMetricsReader)(root),
        "framework": (S3AlgorithmMetricsReader if s3 else LocalAlgorithmMetricsReader)(root),
    }
    answers = []
    for reader, args, kwargs in INPUT["queries"]:
        kwargs = dict(kwargs)
        if "unit" in kwargs:
            kwargs["unit"] = TimeUnits[kwargs["unit"]]
        events = readers[reader].get_events(*args, **kwargs)
        if reader == "system":
            rows = [[e.type, e.name, e.dimension, e.value, e.node_id, e.timestamp] for e in events]
        else:
            rows = [[e.event_phase, e.event_name, e.start_time, e.duration, e.node_id, e.event_args]
                    for e in events if e.phase == "X"]
        answers.append(sorted(rows, key=lambda r: json.dumps(r)))
    emit(answers)
"""


def _ours(readers: dict) -> list:
    answers = []
    for reader, args, kwargs in QUERIES:
        kwargs = dict(kwargs)
        if "unit" in kwargs:
            kwargs["unit"] = TimeUnits[kwargs["unit"]]
        events = readers[reader].get_events(*args, **kwargs)
        if reader == "system":
            rows = [[e.type, e.name, e.dimension, e.value, e.node_id, e.timestamp] for e in events]
        else:
            rows = [
                [e.event_phase, e.event_name, e.start_time, e.duration, e.node_id, e.event_args]
                for e in events
            ]
        answers.append(sorted(rows, key=json.dumps))
    return answers


def _compare(theirs: list, ours: list) -> None:
    assert len(theirs) == len(ours) == len(QUERIES)
    for query, their_rows, our_rows in zip(QUERIES, theirs, ours):
        assert our_rows == their_rows, query
    assert sum(1 for rows in ours if rows) >= len(QUERIES) - 1  # one query is empty for both: the suffix


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("differential") / "profiler-output"
    _build(root)
    return root


def test_local_readers_match_smdebugs(tree: Path) -> None:
    theirs = run_smdebug(SMDEBUG_SNIPPET, {"root": str(tree), "queries": QUERIES}).data
    ours = _ours(
        {"system": LocalSystemMetricsReader(str(tree)), "framework": LocalAlgorithmMetricsReader(str(tree))}
    )
    _compare(theirs, ours)


def test_s3_readers_match_smdebugs(tree: Path, s3_bucket: str, s3_endpoint: str) -> None:
    uri = upload_tree(tree, s3_bucket, "jobs/differential")
    theirs = run_smdebug(SMDEBUG_SNIPPET, {"root": uri, "queries": QUERIES}, s3_endpoint=s3_endpoint).data
    ours = _ours({"system": S3SystemMetricsReader(uri), "framework": S3AlgorithmMetricsReader(uri)})
    _compare(theirs, ours)


def test_time_conversions_and_file_names_match_smdebugs() -> None:
    from tornasole.profiler.smdebug_modules import utils as ours

    stamps = [1591160699.4570894, 1700000000.0000005, 1795909064.1928875, 0.1 + 0.2, 1234567.891]
    names = [
        "job/profiler-output/system/incremental/2020060500/1591160699.algo-1.json",
        "job/profiler-output/system/1591160699.algo-12.json",
        "job/profiler-output/system/incremental/1591160699.lgo-1.json",
        "x/framework/pevents/2020051923/1589930988000000_4487_0000_pythontimeline.json",
        "x/framework/pevents/2020052602/1590461127873222_0001_model_timeline.json",
    ]
    code = """
        from smdebug.profiler import utils as u
        units = [u.TimeUnits.SECONDS, u.TimeUnits.MILLISECONDS, u.TimeUnits.MICROSECONDS]
        stamps = INPUT["stamps"]
        emit({
            "ns": [[u.convert_utc_timestamp_to_nanoseconds(s, unit) for unit in units] for s in stamps],
            "us": [[u.convert_utc_timestamp_to_microseconds(s, unit) for unit in units] for s in stamps],
            "s": [[u.convert_utc_timestamp_to_seconds(s, unit) for unit in units] for s in stamps],
            "text": [u.us_since_epoch_to_human_readable_time(s * 1e6) for s in INPUT["stamps"]],
            "system": [[u.validate_system_profiler_file(n),
                        u.get_utctimestamp_us_since_epoch_from_system_profiler_file(n),
                        u.get_node_id_from_system_profiler_filename(n)] for n in INPUT["names"][:3]],
            "trace": [[u.get_timestamp_from_tracefilename(n), u.get_node_id_from_tracefilename(n)]
                      for n in INPUT["names"][3:]],
        })
    """
    theirs = run_smdebug(code, {"stamps": stamps, "names": names}).data
    units = [TimeUnits.SECONDS, TimeUnits.MILLISECONDS, TimeUnits.MICROSECONDS]
    assert theirs["ns"] == [[ours.convert_utc_timestamp_to_nanoseconds(s, u) for u in units] for s in stamps]
    assert theirs["us"] == [[ours.convert_utc_timestamp_to_microseconds(s, u) for u in units] for s in stamps]
    assert theirs["s"] == [[ours.convert_utc_timestamp_to_seconds(s, u) for u in units] for s in stamps]
    assert theirs["text"] == [ours.us_since_epoch_to_human_readable_time(s * 1e6) for s in stamps]
    assert theirs["system"] == [
        [
            ours.validate_system_profiler_file(n),
            ours.get_utctimestamp_us_since_epoch_from_system_profiler_file(n),
            ours.get_node_id_from_system_profiler_filename(n),
        ]
        for n in names[:3]
    ]
    assert theirs["trace"] == [
        [ours.get_timestamp_from_tracefilename(n), ours.get_node_id_from_tracefilename(n)] for n in names[3:]
    ]

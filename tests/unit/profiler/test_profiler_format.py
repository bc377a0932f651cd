"""The profiler's file format: names, system-metric lines and trace files round-trip; bad input is named."""

from __future__ import annotations

import json

import pytest

from tornasole.exceptions import FormatError
from tornasole.profiler.format import paths, system_records, trace_events
from tornasole.profiler.format.system_records import SystemRecord
from tornasole.profiler.format.trace_events import TraceEvent

T0 = 1_591_160_699.457


def _record(value: float = 4.76, name: str = "cpu0", timestamp: float = T0) -> SystemRecord:
    return SystemRecord("cpu", name, system_records.CPU_UTILIZATION, value, "algo-1", timestamp)


def test_system_file_name_is_smdebugs_layout_and_parses_back() -> None:
    name = paths.system_file_name(T0, "algo-2")
    assert name == "system/incremental/2020060305/1591160699.algo-2.json"
    parsed = paths.parse_system_file_name("s3://b/job/profiler-output/" + name)
    assert parsed == paths.SystemFileName(timestamp_s=1591160699, node="algo-2")
    assert paths.profiler_file_kind("job/profiler-output/" + name) == "system"


def test_framework_file_name_carries_end_time_and_node_and_parses_back() -> None:
    node = paths.framework_node_id(3, "ip_10_0_0_1.ec2")
    assert node == "3-ip-10-0-0-1.ec2"
    name = paths.framework_file_name(1_590_461_127_873_222, node)
    assert name == "framework/pevents/2020052602/1590461127873222_3-ip-10-0-0-1.ec2_pythontimeline.json"
    parsed = paths.parse_framework_file_name("/tmp/t/profiler-output/" + name)
    assert parsed == paths.FrameworkFileName(1_590_461_127_873_222, node, "pythontimeline.json")
    assert paths.profiler_file_kind("t/profiler-output/" + name) == "framework"


def test_smdebugs_own_sample_names_parse() -> None:
    # names as they appear in smdebug's test resources and SageMaker's output
    assert paths.parse_framework_file_name(
        "x/framework/pevents/2020052602/1590461127873222_0001_model_timeline.json"
    ) == paths.FrameworkFileName(1590461127873222, "0001", "model_timeline.json")
    assert paths.parse_system_file_name(
        "x/system/incremental/1591748100.algo-1.json"
    ) == paths.SystemFileName(1591748100, "algo-1")


@pytest.mark.parametrize(
    "key",
    [
        "job/profiler-output/system/incremental/2020/159116069.algo-1.json",  # 9 digits
        "job/profiler-output/system/incremental/2020/1591160699.worker-1.json",
        "job/profiler-output/framework/pevents/2020/123_node_notes.txt",
        "job/profiler-output/framework/pevents/2020/123_node_evil.json",
        "job/events/000000000001/000000000001_worker_0.tfevents",
        "job/profiler-output/framework/pevents/2020/../../x_y_pythontimeline.json",
    ],
)
def test_other_keys_are_not_profiler_files(key: str) -> None:
    assert paths.profiler_file_kind(key) is None


def test_names_refuse_values_readers_would_misparse() -> None:
    with pytest.raises(FormatError, match="algo-<n>"):
        paths.system_file_name(T0, "worker_1")
    with pytest.raises(FormatError, match="epoch time"):
        paths.system_file_name(12.0)
    with pytest.raises(FormatError, match="node id"):
        paths.framework_file_name(1, "a_b")
    with pytest.raises(FormatError, match="suffix"):
        paths.framework_file_name(1, "a", "notes.json")


def test_system_records_round_trip() -> None:
    records = [_record(), _record(12.5, "cpu1", T0 + 0.5), _record(30.0, system_records.CPU_TOTAL)]
    text = system_records.encode_records(records)
    assert text.count("\n") == 3
    assert json.loads(text.splitlines()[0]) == {
        "Type": "cpu",
        "Name": "cpu0",
        "Dimension": "CPUUtilization",
        "Value": 4.76,
        "NodeId": "algo-1",
        "Timestamp": T0,
    }
    assert system_records.decode_records(text.encode()) == records


def test_a_cut_short_last_line_is_dropped_but_a_bad_middle_line_is_named() -> None:
    text = system_records.encode_records([_record(), _record(5.0)])
    assert system_records.decode_records(text + '{"Type": "cpu", "Na', source="f.json") == [
        _record(),
        _record(5.0),
    ]
    bad = text.replace('"Value":5.0', '"Value":"five"')
    with pytest.raises(FormatError, match=r"f\.json line 2: Value 'five' is not a number"):
        system_records.decode_records(bad, source="f.json")
    with pytest.raises(FormatError, match="f.json line 1: not JSON"):
        system_records.decode_records("nope\n" + text, source="f.json")


def test_hostile_system_values_are_refused() -> None:
    with pytest.raises(FormatError, match="not finite"):
        system_records.encode_record(_record(float("nan")))
    line = (
        '{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":1e999,"NodeId":"a","Timestamp":1}\n'
    )
    with pytest.raises(FormatError, match="line 1: Value inf is not finite"):
        system_records.decode_records(line + line)
    long_name = json.dumps({"Type": "cpu", "Name": "x" * 1000, "Dimension": "D", "Value": 1, "Timestamp": 1})
    with pytest.raises(FormatError, match="name must be a string"):
        system_records.decode_records(long_name + "\n" + long_name)


def test_trace_file_round_trip_with_smdebugs_metadata() -> None:
    origin = 1_590_461_107_892_211
    events = [
        TraceEvent("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", origin + 1200, 5310, args={"step_num": "0"}),
        TraceEvent(trace_events.FORWARD, "model", origin + 1300, 2000, args={"step_num": "0"}),
        TraceEvent("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", origin + 7000, 5000, args={"step_num": "1"}),
    ]
    text = trace_events.encode_trace_file(origin, events)
    body = json.loads(text)
    assert body[0] == {
        "name": "process_name",
        "ph": "M",
        "pid": 0,
        "args": {"start_time_since_epoch_in_micros": origin},
    }
    step_events = [e for e in body if e["ph"] == "X" and e["name"].startswith("Step")]
    assert [e["ts"] for e in step_events] == [1200, 7000]
    decoded = trace_events.decode_trace_file(text)
    assert decoded.start_time_us == origin
    assert decoded.events == tuple(events)
    assert decoded.end_us == origin + 12000


def test_bad_trace_files_are_named() -> None:
    with pytest.raises(FormatError, match="t.json: not a JSON trace file"):
        trace_events.decode_trace_file("[{", source="t.json")
    with pytest.raises(FormatError, match="JSON array"):
        trace_events.decode_trace_file('{"a": 1}', source="t.json")
    with pytest.raises(FormatError, match=r"t.json event 0: 'ts' must be a number"):
        trace_events.decode_trace_file('[{"ph": "X", "name": "a", "ts": "soon", "dur": 1}]', source="t.json")
    with pytest.raises(FormatError, match="before the file's origin"):
        trace_events.encode_trace_file(100, [TraceEvent("p", "n", 50, 1)])

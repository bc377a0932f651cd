"""The capture request file: what the evaluator writes and the hook reads, validated on both sides."""

from __future__ import annotations

import json

import pytest

from tornasole.format.capture_request import (
    DEFAULT_CAPTURE_COLLECTIONS,
    DEFAULT_CAPTURE_STEPS,
    MAX_CAPTURE_STEPS,
    CaptureRequest,
    CaptureRequestError,
    capture_request_file_name,
    is_capture_request_key,
    parse_collections,
    parse_steps,
)


def test_a_request_round_trips_through_its_file_body() -> None:
    r = CaptureRequest("job-1:2:capture/LossSpike", 20, ("gradients", "weights"), "LossSpike", "job-1", 7)
    body = json.loads(r.encode())
    assert body == {
        "Version": 1,
        "RequestId": "job-1:2:capture/LossSpike",
        "TrainingJobName": "job-1",
        "RuleConfigurationName": "LossSpike",
        "Step": 7,
        "Steps": 20,
        "Collections": ["gradients", "weights"],
    }
    assert CaptureRequest.decode(r.encode(), "f.json") == r


def test_steps_and_collections_parse_sagemaker_strings_with_defaults() -> None:
    assert parse_steps("20") == 20
    assert parse_steps(None) == DEFAULT_CAPTURE_STEPS
    assert parse_steps(MAX_CAPTURE_STEPS) == MAX_CAPTURE_STEPS
    assert parse_collections(" Weights ,gradients,weights") == ("gradients", "weights")
    assert parse_collections(["losses"]) == ("losses",)
    assert parse_collections("") == DEFAULT_CAPTURE_COLLECTIONS


@pytest.mark.parametrize("bad", ["0", "101", "-3", "1e9", "ten", 2.5, True, [], {"a": 1}, 10**18])
def test_steps_out_of_bounds_or_not_whole_are_refused(bad) -> None:
    with pytest.raises(CaptureRequestError, match="steps .* must be a whole number from 1 to 100"):
        parse_steps(bad, "action #0 (capture)")


@pytest.mark.parametrize("bad", ["all", "default", "weights,secrets", ["weights", 3], ["x"] * 100, 5])
def test_unknown_collections_are_refused_by_name(bad) -> None:
    with pytest.raises(CaptureRequestError, match="collection"):
        parse_collections(bad)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\xff\xfe", "not a JSON capture request"),
        (b"null", "a JSON object"),
        (b'{"Version": 2, "RequestId": "x", "Steps": 1, "Collections": ["weights"]}', "unsupported Version"),
        (b'{"RequestId": "", "Steps": 1, "Collections": ["weights"]}', "RequestId"),
        (b'{"RequestId": "x", "Steps": 1}', "Steps and Collections are required"),
        (b'{"RequestId": "x", "Steps": "5", "Collections": ["weights"]}', "Steps must be a number"),
        (b'{"RequestId": "x", "Steps": 5, "Collections": []}', "non-empty"),
        (b'{"RequestId": "x", "Steps": 5, "Collections": ["weights"], "Step": "3"}', "Step must be"),
        (b" " * 5000, "at most 4096"),
    ],
)
def test_a_hostile_file_is_refused_with_its_path_in_the_message(data: bytes, why: str) -> None:
    with pytest.raises(CaptureRequestError, match=why) as info:
        CaptureRequest.decode(data, "s3://b/run/tornasole_capture/x.json")
    assert str(info.value).startswith("s3://b/run/tornasole_capture/x.json: ")


def test_file_names_are_one_per_rule_and_safe_for_any_rule_name() -> None:
    a, b = capture_request_file_name("LossSpike"), capture_request_file_name("../../etc/passwd")
    assert a != b
    assert a.startswith("tornasole_capture/")
    assert b.startswith("tornasole_capture/")
    assert "/" not in b.removeprefix("tornasole_capture/")
    assert is_capture_request_key(f"trials/job/{a}")
    assert not is_capture_request_key("trials/job/tornasole_stop_training.json")
    assert not is_capture_request_key("trials/job/index/000000000/000000000001_worker_0.json")

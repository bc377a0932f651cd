"""The sandbox request: what the evaluator sends round-trips, and what does not fit is refused by name."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tornasole.evaluator.models import RuleConfig, StepOutcome
from tornasole.evaluator.sandbox.wire import (
    MAX_REQUEST_BYTES,
    SandboxRequest,
    outcome_from_reply,
    reply_of,
)
from tornasole.lambda_support.handlers.custom_rule import evaluate

CREDS = {"AccessKeyId": "ASIA0", "SecretAccessKey": "s", "SessionToken": "t"}
RULE = RuleConfig(
    "Mine",
    "MyRule",
    {"threshold": "0.5"},
    source_s3_uri="s3://b-1/rules/r.py",
    other_trials=("s3://b-1/t/other",),
    logging_level="DEBUG",
)


def _request(**changes: Any) -> SandboxRequest:
    base = {
        "job": "job",
        "trial": "s3://b-1/t/job",
        "step": 7,
        "workers": ("worker_0", "worker_1"),
        "rule": RULE,
        "credentials": CREDS,
        "recent": ((6, ("worker_0", "worker_1")),),
        "first": ((0, ("worker_0",)),),
    }
    return SandboxRequest(**{**base, **changes})


def test_a_request_round_trips() -> None:
    request = _request()
    parsed = SandboxRequest.from_event(json.loads(request.to_bytes()))
    assert parsed == request


def test_an_oversized_request_is_refused_before_it_is_sent() -> None:
    big = RuleConfig("Mine", "MyRule", {"p": "x" * MAX_REQUEST_BYTES}, source_s3_uri="s3://b-1/rules/r.py")
    with pytest.raises(ValueError, match="at most"):
        _request(rule=big).to_bytes()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"version": 2}, "version 1"),
        ({"step": True}, "step"),
        ({"step": -1}, "step"),
        ({"step": "7"}, "step"),
        ({"workers": "worker_0"}, "workers"),
        ({"recent": [[1]]}, "recent"),
        ({"first": [[1, ["w"]]] * 300}, "first"),
        ({"credentials": None}, "'credentials'"),
        ({"credentials": {"AccessKeyId": "a"}}, "credentials.SecretAccessKey"),
        ({"job": ["x"]}, "job"),
        ({"rule": {"name": "n"}}, "rule.parameters"),
    ],
)
def test_a_malformed_request_is_refused_naming_the_field(change: dict[str, Any], field: str) -> None:
    event = {**json.loads(_request().to_bytes()), **change}
    with pytest.raises(ValueError, match=field.replace("(", r"\(")):
        SandboxRequest.from_event(event)
    reply = evaluate(event, environ={})
    assert reply["kind"] == "error"
    assert "invalid sandbox request" in reply["reason"]


def test_the_sandbox_refuses_rule_code_when_no_rule_prefix_is_configured() -> None:
    reply = evaluate(json.loads(_request().to_bytes()), environ={})
    assert reply["kind"] == "error"
    assert "outside the allowed prefixes []" in reply["reason"]


@pytest.mark.parametrize(
    "outcome",
    [
        StepOutcome("Mine", 7, fired=True, mode="TRAIN", mode_step=3, details="d", values={"a": 1.5}),
        StepOutcome("Mine", 7, values={"b": "x"}),
        StepOutcome("Mine", 7, skipped=True, values={"skipped": True}),
        StepOutcome("Mine", 7, error="Mine: RuntimeError: no"),
        StepOutcome("Mine", 7, step_error="cannot read step 7"),
    ],
)
def test_a_reply_round_trips_to_the_same_verdict(outcome: StepOutcome) -> None:
    _, back = outcome_from_reply(json.dumps(reply_of(outcome)).encode(), RULE, 7)
    assert (back.verdict, back.fired, back.skipped, back.mode, back.mode_step, back.details, back.values) == (
        outcome.verdict,
        outcome.fired,
        outcome.skipped,
        outcome.mode,
        outcome.mode_step,
        outcome.details,
        outcome.values,
    )
    assert (back.error, back.step_error) == (outcome.error, outcome.step_error)

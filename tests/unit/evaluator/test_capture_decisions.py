"""A rule with a ``capture`` action: its first firing writes a capture request next to the job's output,
through the outbox as the stop signal, and its StatusDetails say where the evidence will be."""

from __future__ import annotations

import dataclasses
import json

from tornasole.evaluator import decisions
from tornasole.evaluator.details import MAX_STATUS_DETAILS
from tornasole.evaluator.models import JobState, JobStatus, RuleConfig, RuleState, RuleStatus, job_arn
from tornasole.evaluator.models import StepOutcome as Out
from tornasole.format.capture_request import CaptureRequest, capture_request_file_name
from tornasole.rules.actions import parse_actions

ACTIONS = parse_actions(
    "Spike",
    '[{"name": "capture", "steps": "20", "collections": "gradients"},'
    ' {"name": "capture", "steps": "5", "collections": "weights"},'
    ' {"name": "email", "endpoint": "a@b.c"}]',
)


def state(status: RuleStatus = RuleStatus.IN_PROGRESS, job: JobStatus = JobStatus.IN_PROGRESS) -> JobState:
    return JobState(
        name="job-1",
        arn=job_arn("job-1", account="123456789012"),
        trial_path="s3://b/run",
        status=job,
        seq=3,
        rules_rev=2,
        rules=(
            RuleState(RuleConfig("Spike", "LossSpike", actions=ACTIONS), status),
            RuleState(RuleConfig("Plain", "LossSpike"), RuleStatus.IN_PROGRESS),
        ),
    )


def test_the_first_firing_asks_for_a_capture_once_with_the_merged_actions() -> None:
    change = decisions.after_outcomes([Out("Spike", 12, fired=True, details="Spike: loss 40x")])(state())
    assert (change.entity, change.status, change.issue_step) == ("Spike", "IssuesFound", 12)
    (item,) = change.extra
    path = f"s3://b/run/{capture_request_file_name('Spike')}"
    assert item.kind == "capture"
    assert item.payload["path"] == path
    request = CaptureRequest.decode(json.dumps(item.payload["body"]).encode(), path)  # as the hook reads it
    assert request == CaptureRequest(
        "job-1:2:capture/Spike", 20, ("gradients", "weights"), "Spike", "job-1", 12
    )
    assert item.event_id == request.request_id  # one outbox item per rule and rules revision
    assert change.details.startswith("Spike: loss 40x Asked the training job for full tensors of gradients, ")
    assert change.details.endswith(f"at its next 20 training steps ({path}).")
    # the rule is IssuesFound now (sticky): firing again asks nothing more
    after = dataclasses.replace(state(RuleStatus.ISSUES_FOUND))
    assert decisions.after_outcomes([Out("Spike", 13, fired=True)])(after) is None


def test_a_long_finding_is_clipped_before_the_capture_note_not_the_note() -> None:
    change = decisions.after_outcomes([Out("Spike", 1, fired=True, details="x" * 5000)])(state())
    assert len(change.details) == MAX_STATUS_DETAILS
    assert change.details.endswith(".json).")


def test_no_capture_for_a_rule_without_the_action_or_a_job_already_stopping() -> None:
    plain = decisions.after_outcomes([Out("Plain", 1, fired=True, details="d")])(state())
    assert (plain.entity, plain.extra, plain.details) == ("Plain", (), "d")
    stopping = decisions.after_outcomes([Out("Spike", 1, fired=True, details="d")])(
        state(job=JobStatus.STOPPING)
    )
    assert (stopping.extra, stopping.details) == ((), "d")


def test_the_capture_action_sends_no_alert_and_the_email_one_still_does() -> None:
    items = decisions.alert_items(state(), ("Spike", 3, "TRAIN", 3), "d", {}, {}, "3")
    assert [i.payload["action"] for i in items] == ["email"]


def test_the_action_survives_the_stored_rule_configuration() -> None:
    """The evaluator reads its rules back from the state table (RuleConfig JSON): the capture's steps and
    collections come back as numbers and names, so the request the hook reads is valid (they came back as
    strings, and the hook refused the request, before)."""
    config = RuleConfig("Spike", "LossSpike", actions=ACTIONS)
    again = RuleConfig.from_json(config.to_json())
    assert again.actions == ACTIONS
    stored = dataclasses.replace(state(), rules=(RuleState(again, RuleStatus.IN_PROGRESS),))
    (item,) = decisions.after_outcomes([Out("Spike", 4, fired=True)])(stored).extra
    request = CaptureRequest.decode(json.dumps(item.payload["body"]).encode(), item.payload["path"])
    assert (request.steps, request.collections) == (20, ("gradients", "weights"))


def test_the_issue_event_of_a_capturing_rule_says_where_the_request_is() -> None:
    (event, email) = decisions.issue_extras(state(), Out("Spike", 12, fired=True, details="d"), ["worker_0"])
    assert event.kind == "event"
    assert email.kind == "alert"
    assert event.payload["detail"]["CaptureRequest"] == {
        "Path": f"s3://b/run/{capture_request_file_name('Spike')}",
        "Steps": 20,
        "Collections": ["gradients", "weights"],
    }
    (plain,) = decisions.issue_extras(state(), Out("Plain", 12, fired=True, details="d"), ["worker_0"])
    assert "CaptureRequest" not in plain.payload["detail"]

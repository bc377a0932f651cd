"""The three handlers with the sample events of tests/events, and bad input at the boundary."""

from __future__ import annotations

import time

import pytest
from evaluator_stack import BUCKET, TRIAL, Stack, event_ids, load_event, load_handler, s3_event

from tornasole.aws.clients import client
from tornasole.evaluator.service import Evaluator
from tornasole.evaluator.store.outbox import OutboxPublisher
from tornasole.evaluator.store.state_table import StateTable
from tornasole.exceptions import ConfigurationError
from tornasole.jobs import TornasoleJobs, describe, rule_job_summary
from tornasole.lambda_support.env import HandlerEnv

VG = {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"threshold": "0.001"}}


def test_sample_index_event_for_an_unknown_trial_is_kept_until_registration(stack: Stack) -> None:
    result = stack.deliver(load_event("s3_put_index.json"))["results"][0]
    assert (result["kind"], result["action"], result["step"]) == ("index", "orphan", 10)
    stack.put_job_config({"TrainingJobName": "my-job", "DebugRuleConfigurations": [VG]})
    (note,) = stack.notifications()
    assert stack.deliver(note)["results"][0]["reason"] == "1 earlier index files replayed"


def test_sample_end_marker_event_key_is_url_decoded(stack: Stack) -> None:
    result = stack.deliver(load_event("s3_put_end_marker.json"))["results"][0]
    assert result["key"] == "jobs/my-job/training_job_end.ts"
    assert (result["kind"], result["action"]) == ("end_marker", "ignored")


def test_sample_collections_event(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    stack.write_collections(num_workers=3)
    stack.notifications()
    result = stack.deliver(load_event("s3_put_collections.json"))["results"][0]
    assert (result["kind"], result["action"]) == ("collections", "num_workers")
    assert result["reason"].startswith("num_workers=3")


def test_sample_stream_event_publishes_outbox_items_only(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    resp = stack.publish.handler(load_event("dynamodb_stream_outbox.json"), stack.context)
    assert resp == {"batchItemFailures": []}
    events = stack.events()
    assert event_ids(events) == ["my-job:1:job:InProgress"]
    assert events[0]["detail-type"] == "SageMaker Training Job State Change"
    assert events[0]["source"] == "tornasole"
    assert events[0]["resources"] == ["arn:aws:tornasole:us-east-1:123456789012:training-job/my-job"]


def test_sample_schedule_event(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    report = stack.scheduled.handler(load_event("schedule.json"), stack.context)
    assert report == {
        "jobs": 1,
        "stalled": 0,
        "completed": 0,
        "redriven": 0,
        "steps_redriven": 0,
        "steps_settled": 0,
        "idle_ended": 0,
        "errors": [],
    }


def test_keys_that_are_not_tornasole_files_are_ignored(stack: Stack) -> None:
    for key in (
        "jobs/my-job/notes.json",
        "jobs/my-job/index/000000000/readme.json",
        "jobs/my-job/events/000000000005/000000000005_worker_0.json",
        "jobs/my-job/tornasole_stop_training.json",
    ):
        result = stack.deliver(s3_event(BUCKET, key))["results"][0]
        assert result["action"] == "ignored", key


def test_a_corrupt_step_file_is_recorded_and_later_steps_go_on(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    stack.write_collections()
    stack.write_step(0)
    client("s3").put_object(
        Bucket=BUCKET, Key="jobs/my-job/index/000000000/000000000005_worker_0.json", Body=b"{oops"
    )
    stack.write_step(10)
    stack.write_end()
    results = [stack.deliver(n)["results"][0] for n in stack.notifications()]
    assert [r["action"] for r in results] == [
        "num_workers",
        "evaluated",
        "evaluated",
        "evaluated",
        "completed",
    ]
    # the corrupt file is the step's problem, not the rule's: recorded against step 5, the rule goes on
    (summary,) = rule_job_summary("my-job")
    assert summary["RuleEvaluationStatus"] == "NoIssuesFound"
    assert summary["StatusDetails"] == (  # the unreadable step is counted (#34 N13)
        "VanishingGradient: no issues found in 2 evaluated steps; "
        "1 step unreadable, incomplete or given up (`tornasole jobs status my-job`)"
    )
    records = {r["step"]: r for r in TornasoleJobs().rule_evaluations("my-job", "VanishingGradient")}
    assert sorted(records) == [0, 5, 10]
    assert "000000000005_worker_0.json" in records[5]["step_error"]
    assert "error" not in records[5]
    assert describe("my-job")["TrainingJobStatus"] == "Completed"


def test_steps_before_an_api_registration_are_evaluated_by_the_schedule(stack: Stack) -> None:
    stack.write_collections()
    stack.write_step(0, grad=1e-9)
    for note in stack.notifications():
        stack.deliver(note)
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    env = HandlerEnv.from_environ()
    later = Evaluator(
        StateTable(env.state_table), OutboxPublisher.from_env(env), clock=lambda: time.time() + 120
    )
    assert later.scheduled_check().steps_redriven == 1
    assert rule_job_summary("my-job")[0]["RuleEvaluationStatus"] == "IssuesFound"
    assert StateTable().query("PENDING", "", index=True) == []


def test_handlers_name_the_missing_setting(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORNASOLE_STATE_TABLE")
    module = load_handler("on_object_created")  # importing builds nothing; the first call reads the settings
    with pytest.raises(ConfigurationError, match="TORNASOLE_STATE_TABLE is not set"):
        module.evaluator()
    monkeypatch.setenv("TORNASOLE_STATE_TABLE", "t")
    monkeypatch.delenv("TORNASOLE_EVENT_BUS")
    with pytest.raises(ConfigurationError, match="TORNASOLE_EVENT_BUS is not set"):
        HandlerEnv.from_environ()


def test_keys_outside_the_trial_prefix_are_ignored(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORNASOLE_TRIAL_PREFIX", "jobs/")
    monkeypatch.setenv("TORNASOLE_CUSTOM_RULES_PREFIX", "s3://rules-bucket/custom-rules/")
    module = load_handler("on_object_created")
    result = module.handler(
        s3_event(BUCKET, "elsewhere/index/000000000/000000000010_worker_0.json"), stack.context
    )
    assert result["results"][0]["reason"] == "outside the trial prefix 'jobs/'"
    # trust model: with a rule prefix configured, rule code comes from there only (not the trials)
    assert module.evaluator().allowed_rule_prefixes == ("s3://rules-bucket/custom-rules/",)
    inside = module.handler(
        s3_event(BUCKET, "jobs/my-job/index/000000000/000000000010_worker_0.json"), stack.context
    )
    assert inside["results"][0]["action"] == "orphan"

"""Issue #28: a job's life cycle cannot hang or go stale (``tornasole.evaluator.lifecycle``).

Late registration finds the end marker already there; SageMaker's own state-change event ends a job whose
hook wrote no end marker; a job with no new data for its idle timeout ends Failed with the reason; a
trial written again after its job ended is recorded on the job and announced once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from evaluator_stack import TRIAL, Stack

from tornasole.evaluator.lifecycle import DEFAULT_IDLE_TIMEOUT_S
from tornasole.evaluator.service import Evaluator
from tornasole.evaluator.store.outbox import OutboxPublisher
from tornasole.evaluator.store.state_table import StateTable
from tornasole.exceptions import InvalidJobConfiguration
from tornasole.jobs import Rule, TornasoleJobs
from tornasole.lambda_support.env import HandlerEnv

SCHEMA = json.loads((Path(__file__).parent / "events.schema.json").read_text())


def vg(name: str = "VanishingGradient", **params: str) -> Rule:
    base = {"DebugRuleConfiguration": {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {}}}
    return Rule.sagemaker(base, name=name, rule_parameters={"threshold": "0.001", **params})


def evaluator(clock_offset: float = 0.0) -> Evaluator:
    env = HandlerEnv.from_environ()
    return Evaluator(
        StateTable(env.state_table), OutboxPublisher.from_env(env), clock=lambda: time.time() + clock_offset
    )


def statuses(job: str = "my-job") -> dict[str, str]:
    return {
        s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in TornasoleJobs().rule_job_summary(job)
    }


def sagemaker_event(status: str, name: str = "my-job", **detail: Any) -> dict[str, Any]:
    """The shape of SageMaker's event (EventBridge's envelope; detail as DescribeTrainingJob)."""
    return {
        "version": "0",
        "id": "5c8f8a53-0000-4a3e-9d5a-2f54d9b1a7e1",
        "detail-type": "SageMaker Training Job State Change",
        "source": "aws.sagemaker",
        "account": "123456789012",
        "time": "2026-11-28T17:00:00Z",
        "region": "us-east-1",
        "resources": [f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}"],
        "detail": {
            "TrainingJobName": name,
            "TrainingJobStatus": status,
            "SecondaryStatus": status,
            **detail,
        },
    }


def _train(stack: Stack, steps: tuple[int, ...] = (0, 2, 4), end: bool = True) -> None:
    stack.write_collections()
    for step in steps:
        stack.write_step(step)
    if end:
        stack.write_end()


def test_registration_after_training_ended_completes(stack: Stack) -> None:
    """Fails on bdea76b: the end marker's notification found no job, and nothing looked again."""
    _train(stack)
    for note in stack.notifications():  # index files become orphans; the end marker is ignored
        stack.deliver(note)
    TornasoleJobs().register_job("my-job", TRIAL, [vg()])
    assert stack.describe()["TrainingJobStatus"] == "InProgress"
    evaluator().scheduled_check()  # evaluates the adopted steps, then the job completes
    d = stack.describe()
    assert d["TrainingJobStatus"] == "Completed"
    assert statuses() == {"VanishingGradient": "NoIssuesFound"}
    assert "3 evaluated steps" in d["DebugRuleEvaluationStatuses"][0]["StatusDetails"]


def test_sagemaker_completed_event_ends_a_job_without_end_marker(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [vg()])
    _train(stack, end=False)
    for note in stack.notifications():
        stack.deliver(note)
    assert stack.describe()["TrainingJobStatus"] == "InProgress"
    result = evaluator().training_state_change(sagemaker_event("Completed"))
    assert result["action"] == "completed"
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    assert statuses() == {"VanishingGradient": "NoIssuesFound"}
    again = evaluator().training_state_change(sagemaker_event("Completed"))
    assert again == {
        "job": "my-job",
        "training_status": "Completed",
        "action": "ignored",
        "reason": "job is already Completed",
    }


def test_sagemaker_failed_event_fails_the_job_with_sagemakers_reason(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [vg()])
    _train(stack, steps=(0, 2), end=False)
    for note in stack.notifications():
        stack.deliver(note)
    evaluator().training_state_change(sagemaker_event("Failed", FailureReason="AlgorithmError: OOM"))
    d = stack.describe()
    assert d["TrainingJobStatus"] == "Failed"
    assert d["FailureReason"] == "AlgorithmError: OOM"
    assert statuses() == {"VanishingGradient": "NoIssuesFound"}  # the verdict on the data it wrote


def test_sagemaker_event_waits_for_steps_still_in_flight(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [vg()])
    _train(stack, steps=(0, 2), end=False)
    coll, s0, s2 = stack.notifications()
    stack.deliver(coll)
    stack.deliver(s0)
    assert evaluator().training_state_change(sagemaker_event("Stopped"))["action"] == "end_seen"
    assert stack.describe()["TrainingJobStatus"] == "InProgress"
    stack.deliver(s2)
    assert stack.describe()["TrainingJobStatus"] == "Stopped"


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ({**sagemaker_event("Completed"), "source": "tornasole"}, "event source 'tornasole' is not"),
        ({**sagemaker_event("Completed"), "detail-type": "Other"}, "event detail-type 'Other' is not"),
        ({**sagemaker_event("Completed"), "detail": []}, "the event has no 'detail' object"),
        (sagemaker_event("Completed", name=""), "detail.TrainingJobName '' is not"),
        ([], "the event must be a JSON object"),
    ],
)
def test_other_events_are_refused_by_name(stack: Stack, event: Any, reason: str) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [vg()])
    result = evaluator().training_state_change(event)
    assert result["action"] == "invalid"
    assert reason in result["reason"]
    assert stack.describe()["TrainingJobStatus"] == "InProgress"


def test_non_terminal_and_unknown_jobs_are_ignored(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [vg()])
    assert evaluator().training_state_change(sagemaker_event("InProgress"))["action"] == "ignored"
    unknown = evaluator().training_state_change(sagemaker_event("Completed", name="someone-else"))
    assert unknown["reason"] == "no job named 'someone-else' is registered"
    assert stack.describe()["TrainingJobStatus"] == "InProgress"


def test_idle_timeout_ends_the_job_failed_with_the_reason(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [vg(), vg("Strict", threshold="1e-30")], idle_timeout_s=60)
    stack.write_collections()
    stack.write_step(0, grad=1e-6)  # VanishingGradient fires; Strict has no verdict yet
    for note in stack.notifications():
        stack.deliver(note)
    assert evaluator(30).scheduled_check().idle_ended == 0
    assert stack.describe()["TrainingJobStatus"] == "InProgress"
    assert evaluator(120).scheduled_check().idle_ended == 1
    d = stack.describe()
    assert d["TrainingJobStatus"] == "Failed"
    assert d["FailureReason"].startswith("IdleTimeout: no new data for 1")
    assert "(idle timeout 60s)" in d["FailureReason"]
    assert statuses() == {"VanishingGradient": "IssuesFound", "Strict": "Stopped"}
    strict = d["DebugRuleEvaluationStatuses"][1]["StatusDetails"]
    assert strict.startswith("Strict: no verdict; IdleTimeout:")


def test_idle_timeout_defaults_to_six_hours(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [vg()])
    evaluator(DEFAULT_IDLE_TIMEOUT_S - 60).scheduled_check()
    assert stack.describe()["TrainingJobStatus"] == "InProgress"
    evaluator(DEFAULT_IDLE_TIMEOUT_S + 60).scheduled_check()
    assert stack.describe()["TrainingJobStatus"] == "Failed"


def test_an_ended_job_is_settled_by_completion_not_by_the_idle_timeout(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [vg()], idle_timeout_s=60)
    _train(stack)
    for note in stack.notifications():
        stack.deliver(note)
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    assert evaluator(3600).scheduled_check().idle_ended == 0


@pytest.mark.parametrize("bad", [0, -5, "soon", float("nan"), 10**9, True])
def test_idle_timeout_parameter_is_validated_by_name(stack: Stack, bad: Any) -> None:
    with pytest.raises(InvalidJobConfiguration, match="idle_timeout_s must be"):
        TornasoleJobs().register_job("my-job", TRIAL, [vg()], idle_timeout_s=bad)


def test_job_file_carries_the_idle_timeout(stack: Stack) -> None:
    config = {
        "TrainingJobName": "my-job",
        "DebugRuleConfigurations": [
            {"RuleConfigurationName": "VanishingGradient", "RuleEvaluatorImage": "x", "RuleParameters": {}}
        ],
        "IdleTimeoutSeconds": 30,
    }
    stack.put_job_config(config)
    for note in stack.notifications():
        stack.deliver(note)
    assert stack.describe()["TrainingJobStatus"] == "InProgress"
    evaluator(90).scheduled_check()
    assert stack.describe()["TrainingJobStatus"] == "Failed"


def test_rewrite_after_completion_is_recorded_and_announced_once(stack: Stack) -> None:
    """Fails on bdea76b: the job kept saying Completed / NoIssuesFound about data that was overwritten."""
    TornasoleJobs().register_job("my-job", TRIAL, [vg()])
    _train(stack)
    for note in stack.notifications():
        stack.deliver(note)
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    stack.pump_stream()
    stack.events()
    for _ in range(2):  # the re-run: step 0 overwritten, then again
        stack.write_step(0, grad=float("nan"))
    notes = stack.notifications()
    assert len(notes) == 2
    for note in notes:
        stack.deliver(note)
    d = stack.describe()
    assert d["TrainingJobStatus"] == "Completed"  # the verdict stays about the data it read...
    rewritten = d["TornasoleTrialRewritten"]  # ...and says it no longer describes the trial
    assert rewritten["Key"] == "jobs/my-job/index/000000000/000000000000_worker_0.json"
    assert rewritten["Rewrites"] == 2
    assert "written again after the job was Completed" in rewritten["StatusDetails"]
    stack.pump_stream()
    announced = [e for e in stack.events() if e["detail-type"] == "Tornasole Trial Rewritten"]
    assert len(announced) == 1
    assert announced[0]["detail"]["TrialPath"] == TRIAL
    assert announced[0]["detail"]["Step"] == 0
    jsonschema.validate(announced[0], SCHEMA)


def test_a_redelivered_notification_after_completion_is_not_a_rewrite(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [vg()])
    _train(stack)
    notes = stack.notifications()
    for note in notes:
        stack.deliver(note)
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    for note in notes:  # S3 delivers at least once: the same records (same eventTime) again
        stack.deliver(note)
    assert "TornasoleTrialRewritten" not in stack.describe()
    stack.pump_stream()
    assert not [e for e in stack.events() if e["detail-type"] == "Tornasole Trial Rewritten"]


def test_a_rerun_whose_end_marker_is_handled_first_is_still_a_rewrite(stack: Stack) -> None:
    """The re-run's end marker must not move the job's end past the re-run's own files."""
    TornasoleJobs().register_job("my-job", TRIAL, [vg()])
    _train(stack)
    for note in stack.notifications():
        stack.deliver(note)
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    stack.write_step(0, grad=float("nan"))
    stack.write_end()
    index, end = stack.notifications()
    assert stack.deliver(end)["results"][0]["reason"] == "job is Completed"
    stack.deliver(index)
    rewritten = stack.describe()["TornasoleTrialRewritten"]
    assert rewritten["Key"] == "jobs/my-job/index/000000000/000000000000_worker_0.json"
    assert rewritten["Rewrites"] == 1


def test_the_other_workers_redelivered_files_after_completion_are_not_a_rewrite(stack: Stack) -> None:
    """Worker 1 writes after worker 0's end marker was seen: its re-deliveries are still the run's own."""
    TornasoleJobs().register_job("my-job", TRIAL, [vg()])
    stack.write_collections(num_workers=2)
    stack.write_step(0, worker="worker_0")
    stack.write_end()  # worker 0 is done
    first = stack.notifications()
    for note in first:
        stack.deliver(note)
    stack.write_step(0, worker="worker_1")
    stack.write_end()  # worker 1's marker (same key)
    late = stack.notifications()
    for note in late:
        stack.deliver(note)
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    for note in first + late:
        stack.deliver(note)
    assert "TornasoleTrialRewritten" not in stack.describe()

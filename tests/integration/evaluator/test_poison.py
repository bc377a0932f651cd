"""No poison steps: a rule, a file or an AWS hiccup costs its own outcome, never the step, job or check."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from botocore.exceptions import ClientError
from evaluator_stack import BUCKET, TRIAL, Stack

from tornasole.aws.clients import client
from tornasole.evaluator.failures import TransientError
from tornasole.evaluator.runner import StepRunner, default_rule_factory
from tornasole.evaluator.sandbox.isolation import Budget
from tornasole.evaluator.service import Evaluator
from tornasole.evaluator.store.item_limits import DYNAMODB_ITEM_BYTES, item_bytes
from tornasole.evaluator.store.outbox import OutboxPublisher
from tornasole.evaluator.store.state_table import StateTable
from tornasole.evaluator.store.step_store import MAX_STEP_ATTEMPTS
from tornasole.jobs import Rule, TornasoleJobs, rule_job_summary
from tornasole.lambda_support.env import HandlerEnv
from tornasole.rules.outcome import RuleOutcome

VG = {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"threshold": "0.001"}}


def rule(name: str) -> Any:
    """A VanishingGradient configured under another name (the test factories misbehave by name)."""
    base = {"DebugRuleConfiguration": {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {}}}
    return Rule.sagemaker(base, name=name, rule_parameters={"threshold": "0.001"})


def evaluator(clock_offset: float = 0.0, factory: Any = None, budget: Budget | None = None) -> Evaluator:
    env = HandlerEnv.from_environ()
    return Evaluator(
        StateTable(env.state_table),
        OutboxPublisher.from_env(env),
        runner=StepRunner(factory, budget=budget) if factory else None,
        clock=lambda: time.time() + clock_offset,
    )


def statuses(job: str = "my-job") -> dict[str, tuple[str, str]]:
    return {
        s["RuleConfigurationName"]: (s["RuleEvaluationStatus"], s["StatusDetails"])
        for s in rule_job_summary(job)
    }


def keys(stack: Stack) -> list[str]:
    return [n["Records"][0]["s3"]["object"]["key"].replace("%2F", "/") for n in stack.notifications()]


class Misbehaving:
    """A rule object doing one bad thing at one step, and being a healthy rule otherwise."""

    def __init__(self, inner: Any, what: str, at: int) -> None:
        self.inner, self.what, self.at = inner, what, at

    def history_steps(self) -> int:
        return 0

    def evaluate(self, step: int) -> Any:
        if step == self.at:
            if self.what == "exit":
                sys.exit("rule quits")
            if self.what == "loop":
                while True:
                    pass
            if self.what == "huge":
                return RuleOutcome("Huge", step, True, details="x" * 100_000, values={"blob": "y" * 600_000})
        return self.inner.evaluate(step)


def factory_with(name: str, what: str, at: int = 5) -> Any:
    def factory(config: Any, trial: Any, step: int) -> Any:
        built = default_rule_factory(config, trial, step)
        return Misbehaving(built, what, at) if config.name == name else built

    return factory


def run_three_steps(stack: Stack, svc: Evaluator, rules: list[dict[str, Any]]) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, rules)
    stack.write_collections()
    for step in (0, 5, 10):
        stack.write_step(step, grad=1e-6 if step == 10 else 1.0)
    stack.write_end()
    for key in keys(stack):
        svc.handle_object_created(BUCKET, key)


def test_a_rule_calling_sys_exit_costs_only_its_own_outcome(stack: Stack) -> None:
    svc = evaluator(factory=factory_with("Quits", "exit"))
    run_three_steps(stack, svc, [VG, rule("Quits")])
    got = statuses()
    assert got["Quits"][0] == "Error"
    assert "RuleExit: raised SystemExit: rule quits" in got["Quits"][1]
    assert got["VanishingGradient"][0] == "IssuesFound"
    steps = [r["step"] for r in TornasoleJobs().rule_evaluations("my-job", "VanishingGradient")]
    assert steps == [0, 5, 10]
    assert stack.describe()["TrainingJobStatus"] == "Completed"


def test_a_looping_rule_is_stopped_by_its_deadline(stack: Stack) -> None:
    svc = evaluator(factory=factory_with("Loops", "loop"), budget=Budget(0.5))
    start = time.monotonic()
    run_three_steps(stack, svc, [VG, rule("Loops")])
    assert time.monotonic() - start < 60
    got = statuses()
    assert got["Loops"][0] == "Error"
    assert "deadline of 0.5s" in got["Loops"][1]
    assert got["VanishingGradient"][0] == "IssuesFound"


def test_an_oversized_report_never_costs_the_other_rules_their_records(stack: Stack) -> None:
    svc = evaluator(factory=factory_with("Huge", "huge"))
    run_three_steps(stack, svc, [VG, rule("Huge")])
    table = StateTable()
    raw = client("dynamodb").query(
        TableName=table.name,
        KeyConditionExpression="pk = :p AND begins_with(sk, :e)",
        ExpressionAttributeValues={":p": {"S": "JOB#my-job"}, ":e": {"S": "EVAL#"}},
    )["Items"]
    assert len(raw) == 6  # both rules at steps 0, 5, 10
    assert max(item_bytes(i) for i in raw) < DYNAMODB_ITEM_BYTES
    huge = {r["step"]: r for r in TornasoleJobs().rule_evaluations("my-job", "Huge")}
    assert huge[5]["values"]["values_truncated"] is True
    assert len(huge[5]["details"]) <= 1024
    assert statuses()["Huge"][0] == "IssuesFound"
    assert statuses()["VanishingGradient"][0] == "IssuesFound"


@contextmanager
def s3_fails(match: str, code: str = "SlowDown", status: int = 503) -> Iterator[list[str]]:
    """Every S3 call on a key containing ``match`` fails with ``code`` while inside the block."""
    calls: list[str] = []

    def fail(params: dict[str, Any], **_: Any) -> None:
        if match in str(params.get("Key", "")):
            calls.append(params["Key"])
            error = {"Code": code, "Message": "injected"}
            raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject")

    events = client("s3").meta.events
    events.register("before-parameter-build.s3.GetObject", fail)
    try:
        yield calls
    finally:
        events.unregister("before-parameter-build.s3.GetObject", fail)


def test_a_transient_s3_error_keeps_the_step_pending_and_a_later_issue_is_still_found(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    stack.write_collections()
    for step in (0, 5, 20):
        stack.write_step(step, grad=1e-6 if step == 20 else 1.0)
    stack.write_end()
    svc = evaluator()
    with s3_fails("000000000005_worker_0") as calls:
        for key in keys(stack):
            if "000000000005" in key:
                with pytest.raises(TransientError):
                    svc.handle_object_created(BUCKET, key)
            else:
                svc.handle_object_created(BUCKET, key)
    assert calls
    assert [(j, s) for j, s, _ in svc.steps.pending()] == [("my-job", 5)]
    assert statuses()["VanishingGradient"][0] == "IssuesFound"  # step 20 was not blocked by step 5
    assert stack.describe()["TrainingJobStatus"] == "InProgress"
    later = evaluator(clock_offset=3600)
    report = later.scheduled_check()
    assert report.errors == []
    assert report.steps_redriven == 1
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    steps = [r["step"] for r in TornasoleJobs().rule_evaluations("my-job", "VanishingGradient")]
    assert steps == [0, 5, 20]


def test_a_step_failing_every_attempt_is_recorded_for_the_step_and_the_rules_go_on(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    stack.write_collections()
    for step in (0, 5, 10):
        stack.write_step(step, grad=1e-6 if step == 10 else 1.0)
    stack.write_end()
    svc = evaluator()
    with s3_fails("000000000005_worker_0", "InternalError", 500):
        for key in keys(stack):
            try:
                svc.handle_object_created(BUCKET, key)
            except TransientError:
                pass
        checks = 0
        while svc.steps.pending():  # each check re-drives the step once: a failed attempt each time
            checks += 1
            report = evaluator(clock_offset=checks * 3600).scheduled_check()
            assert report.steps_redriven == 1
        assert checks < MAX_STEP_ATTEMPTS  # the first delivery failed too
        assert len(report.errors) == 0  # the last re-drive recorded the step instead of failing
    records = {r["step"]: r for r in TornasoleJobs().rule_evaluations("my-job", "VanishingGradient")}
    assert sorted(records) == [0, 5, 10]
    assert f"could not be evaluated in {MAX_STEP_ATTEMPTS} attempts" in records[5]["step_error"]
    assert "InternalError" in records[5]["step_error"]
    assert statuses()["VanishingGradient"][0] == "IssuesFound"
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    assert svc.steps.pending() == []


def test_the_scheduled_check_resends_events_first_and_survives_a_poison_step(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    TornasoleJobs().register_job("other-job", f"s3://{BUCKET}/jobs/other", [VG])
    stack.write_collections()
    stack.write_step(0)
    svc = evaluator()
    with s3_fails("000000000000_worker_0"):
        for key in keys(stack):
            try:
                svc.handle_object_created(BUCKET, key)
            except TransientError:
                pass
        report = evaluator(clock_offset=3600).scheduled_check()
    assert report.redriven == 2  # both jobs' InProgress events, never published by a stream
    assert report.steps_redriven == 1
    assert len(report.errors) == 1
    assert "my-job" in report.errors[0]
    assert {e["detail"]["TrainingJobName"] for e in stack.events()} == {"my-job", "other-job"}


def test_duplicate_deliveries_in_flight_are_not_failed_attempts(stack: Stack) -> None:
    # five copies of the same notification evaluating the step at once must not give the step up
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    stack.write_collections()
    stack.write_step(0, grad=1e-9)
    svc = evaluator()
    coll, index = keys(stack)
    svc.handle_object_created(BUCKET, coll)
    svc.steps.record_worker("my-job", 0, "worker_0", time.time())
    for _ in range(2 * MAX_STEP_ATTEMPTS):
        assert svc.steps.begin_attempt("my-job", 0, 0) == 0
    assert svc.handle_object_created(BUCKET, index).action == "evaluated"
    assert statuses()["VanishingGradient"][0] == "IssuesFound"

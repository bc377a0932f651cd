"""Completion you can trust: every worker's steps, incomplete steps reported, no NoIssuesFound for nothing."""

from __future__ import annotations

import time
from typing import Any

from evaluator_stack import BUCKET, TRIAL, Stack

from tornasole.evaluator.completion import END_GRACE_S
from tornasole.evaluator.schedule import PENDING_GRACE_MS
from tornasole.evaluator.service import Evaluator
from tornasole.evaluator.store.outbox import OutboxPublisher
from tornasole.evaluator.store.state_table import StateTable
from tornasole.evaluator.store.step_store import StepStore
from tornasole.jobs import TornasoleJobs, rule_job_summary
from tornasole.lambda_support.env import HandlerEnv
from tornasole.stack_spec import DEFAULT_SPEC

VG = {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"threshold": "0.001"}}


def evaluator(clock_offset: float = 0.0) -> Evaluator:
    env = HandlerEnv.from_environ()
    return Evaluator(
        StateTable(env.state_table), OutboxPublisher.from_env(env), clock=lambda: time.time() + clock_offset
    )


def summary(job: str = "my-job") -> dict[str, tuple[str, str]]:
    return {
        s["RuleConfigurationName"]: (s["RuleEvaluationStatus"], s["StatusDetails"])
        for s in rule_job_summary(job)
    }


def deliver_all(stack: Stack, notes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [stack.deliver(n)["results"][0] for n in notes]


def test_the_first_worker_s_end_marker_does_not_complete_the_job(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    stack.write_collections(num_workers=2)
    for step in range(4):
        stack.write_step(step, grad=1e-9 if step == 2 else 1.0, worker="worker_0")
    for step in range(2):
        stack.write_step(step, worker="worker_1")
    stack.write_end()  # worker 0 is done; worker 1 still has steps 2 and 3 to write
    results = deliver_all(stack, stack.notifications())
    assert results[-1]["reason"] == "4 steps written"
    assert stack.describe()["TrainingJobStatus"] == "InProgress"
    stack.write_step(2, grad=1e-9, worker="worker_1")
    stack.write_step(3, worker="worker_1")
    stack.write_end()  # worker 1's marker (same key)
    results = deliver_all(stack, stack.notifications())
    assert [r["action"] for r in results] == ["evaluated", "evaluated", "end_seen"]  # done at step 3
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    assert "TornasoleTrialRewritten" not in stack.describe()  # worker 1's own marker, not a rewrite
    assert summary()["VanishingGradient"][0] == "IssuesFound"  # step 2 was not "ignored: job is Completed"
    steps = [r["step"] for r in TornasoleJobs().rule_evaluations("my-job", "VanishingGradient")]
    assert steps == [0, 1, 2, 3]


def test_a_missing_worker_gives_incomplete_steps_and_nothing_evaluated_not_no_issues(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    stack.write_collections(num_workers=2)  # claims 2 workers, only worker_0 ever writes
    for step in range(3):
        stack.write_step(step)
    stack.write_end()
    deliver_all(stack, stack.notifications())
    assert stack.describe()["TrainingJobStatus"] == "InProgress"
    assert evaluator(clock_offset=END_GRACE_S / 2).scheduled_check().steps_settled == 0  # still in grace
    report = evaluator(clock_offset=END_GRACE_S + 1).scheduled_check()
    assert report.steps_settled == 3
    assert report.errors == []
    d = stack.describe()
    assert d["TrainingJobStatus"] == "Completed"
    status, details = summary()["VanishingGradient"]
    assert status == "Error"  # its data was broken (incomplete steps), not missing from the configuration
    assert details.startswith("VanishingGradient: evaluated 0 of 3 steps: 3 could not be read")
    assert d["DebugRuleEvaluationStatuses"][0]["StatusDetails"] == details  # what describe/CLI show
    records = TornasoleJobs().rule_evaluations("my-job", "VanishingGradient")
    assert [r["step_error"] for r in records][0] == (
        "step 0 is incomplete: 1 of 2 workers wrote it (worker_0) by the end of training"
    )


def test_a_rule_whose_tensors_match_nothing_is_not_no_issues_found(stack: Stack) -> None:
    rules = [VG, {"RuleConfigurationName": "AllZero", "RuleParameters": {"tensor_regex": "nothing/.*"}}]
    TornasoleJobs().register_job("my-job", TRIAL, rules)
    stack.write_collections()
    for step in range(3):
        stack.write_step(step)
    stack.write_end()
    deliver_all(stack, stack.notifications())
    got = summary()
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    assert got["VanishingGradient"] == (
        "NoIssuesFound",
        "VanishingGradient: no issues found in 3 evaluated steps",
    )
    assert got["AllZero"][0] == "NoIssuesFound"  # not an issue, not an error: nothing to read
    assert got["AllZero"][1].startswith(
        "NothingEvaluated: AllZero evaluated 0 of 3 steps: it reads tensors matching tensor_regex "
        "'nothing/.*'"
    )


def test_a_registration_racing_a_step_leaves_no_orphan(stack: Stack, monkeypatch: Any) -> None:
    stack.write_collections()
    stack.write_step(0, grad=1e-9)
    coll, index = stack.notifications()
    real = StepStore.record_orphan

    def registration_lands_first(self: StepStore, *args: Any) -> None:
        # the job registers (and takes the orphans: none yet) between our "no job" read and our orphan write
        TornasoleJobs().register_job("my-job", TRIAL, [VG])
        real(self, *args)

    monkeypatch.setattr(StepStore, "record_orphan", registration_lands_first)
    result = stack.deliver(index)["results"][0]
    assert result["action"] == "adopted"
    assert summary()["VanishingGradient"][0] == "IssuesFound"
    assert StateTable().query(f"TRIAL#{TRIAL}", "ORPHAN#") == []


def test_index_keys_must_round_trip_the_canonical_layout(stack: Stack) -> None:
    from evaluator_stack import s3_event

    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    bad = {
        "jobs/my-job/index/000000000/" + "9" * 45 + "_worker_0.json": "more than 12 digits",
        "jobs/my-job/index/000000007/000000000005_worker_0.json": "not at its canonical place",
        "jobs/my-job/index/000000000/5_worker_0.json": "not at its canonical place",
        "jobs/my-job/index/000000000/000000000005_work\x07er.json": "control characters",
        "jobs/my-job/index/000000000/000000000005_\u202eworker.json": "control characters",
    }
    for key, why in bad.items():
        result = stack.deliver(s3_event(BUCKET, key))["results"][0]
        assert (result["kind"], result["action"]) == ("index", "invalid"), key
        assert why in result["reason"]
    assert stack.describe()["TrainingJobStatus"] == "InProgress"
    assert summary()["VanishingGradient"] == ("InProgress", "")


def test_grace_periods_outlast_the_function_timeout() -> None:
    assert DEFAULT_SPEC.on_object_created.timeout_s * 1000 < PENDING_GRACE_MS
    assert 2 * DEFAULT_SPEC.on_object_created.timeout_s <= END_GRACE_S

"""The evaluator runtime's findings of the hardening issue, each as a scenario with its exact end state.

(Hostile files, keys and rule files: ``test_hostile_inputs``; transient errors:
``test_transient_errors``; duplicated, shuffled, concurrent delivery:
``test_delivery_chaos``; crashes: ``test_crash_injection``.)
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np
from reliability_rig import VG, Rig, trial

from tornasole.aws.clients import client
from tornasole.evaluator.completion import END_GRACE_S
from tornasole.evaluator.details import describe
from tornasole.evaluator.models import JobState, JobStatus, RuleConfig, RuleState, RuleStatus
from tornasole.evaluator.runner import StepRunner, default_rule_factory
from tornasole.evaluator.schedule import PENDING_GRACE_MS
from tornasole.evaluator.store.event_entries import EVENT_BUDGET_BYTES, fit_event
from tornasole.evaluator.store.item_limits import DYNAMODB_ITEM_BYTES, item_bytes
from tornasole.evaluator.store.outbox import CLAIM_TIMEOUT_MS
from tornasole.evaluator.store.step_store import StepStore
from tornasole.jobs import TornasoleJobs
from tornasole.rules.outcome import RuleOutcome
from tornasole.stack_spec import DEFAULT_SPEC, DETAIL_TYPE_JOB_STATE_CHANGE


class Wrapped:
    def __init__(self, inner: Any, evaluate: Any) -> None:
        self.inner, self._evaluate = inner, evaluate

    def history_steps(self) -> int:
        return 0

    def evaluate(self, step: int) -> Any:
        return self._evaluate(self.inner, step)


def run_with(rig: Rig, job: str, evaluate: Any, steps: tuple[int, ...] = (0, 1, 2)) -> Any:
    """A job of two VanishingGradient rules, the second one's evaluate replaced; delivered in a thread."""
    other = {"rule_to_invoke": "VanishingGradient", "threshold": "0.001"}
    rules = [VG, {"RuleConfigurationName": "Other", "RuleParameters": other}]
    TornasoleJobs().register_job(job, trial(job), rules)

    def factory(config: Any, t: Any, step: int) -> Any:
        built = default_rule_factory(
            config.__class__(**{**config.__dict__, "name": "VanishingGradient"}), t, step
        )
        return Wrapped(built, evaluate) if config.name == "Other" else built

    rig.write_collections(job)
    for s in steps:
        rig.write_step(job, s, grad=1e-9 if s == steps[-1] else 1.0)
    rig.write_end(job)
    svc = rig.evaluator(runner=StepRunner(factory))
    errors: list[BaseException] = []

    def deliver() -> None:
        try:
            for note in rig.notes():
                rec = note["Records"][0]["s3"]
                svc.handle_object_created(rec["bucket"]["name"], rec["object"]["key"].replace("%2F", "/"))
        except BaseException as exc:  # noqa: BLE001 - the point: nothing may escape the evaluator
            errors.append(exc)

    worker = threading.Thread(target=deliver, name="dispatcher")  # as local mode's dispatcher thread
    worker.start()
    worker.join(120)
    assert not worker.is_alive()
    assert errors == []
    return svc


def test_a_rule_calling_sys_exit_in_the_dispatcher_thread_costs_only_its_status(rig: Rig) -> None:
    run_with(rig, "exits", lambda inner, step: sys.exit(2))
    got = rig.statuses("exits")
    assert got["Other"][0] == "Error"
    assert "SystemExit" in got["Other"][1]
    assert got["VanishingGradient"][0] == "IssuesFound"
    assert rig.describe_status("exits") == "Completed"
    rig.tally("exits", [0, 1, 2])


def test_an_oversized_rule_report_costs_only_its_own_values(rig: Rig) -> None:
    def huge(inner: Any, step: int) -> Any:
        return RuleOutcome("Other", step, False, details="d" * 50_000, values={"blob": "v" * 500_000})

    run_with(rig, "huge", huge)
    raw = client("dynamodb").query(
        TableName=DEFAULT_SPEC.table.name,
        KeyConditionExpression="pk = :p AND begins_with(sk, :e)",
        ExpressionAttributeValues={":p": {"S": "JOB#huge"}, ":e": {"S": "EVAL#"}},
    )["Items"]
    assert len(raw) == 6
    assert max(item_bytes(i) for i in raw) < DYNAMODB_ITEM_BYTES
    assert rig.records("huge", "Other")[1]["values"]["values_truncated"] is True
    assert rig.statuses("huge")["VanishingGradient"][0] == "IssuesFound"
    rig.tally("huge", [0, 1, 2], ("VanishingGradient", "Other"))


def test_a_large_tensor_no_rule_asks_for_is_never_read(rig: Rig) -> None:
    bytes_read: list[int] = []

    def count(http_response: Any = None, parsed: Any = None, **_: Any) -> None:
        if parsed and "ContentLength" in parsed:
            bytes_read.append(int(parsed["ContentLength"]))

    rig.register("big")
    rig.write_collections("big")
    big = np.zeros(8 * 1024 * 1024, dtype=np.float32)  # 32 MiB that VanishingGradient never reads
    rig.write_step("big", 0, grad=1e-9, extra={"activations/huge": big})
    rig.write_end("big")
    client("s3").meta.events.register("after-call.s3.GetObject", count)
    try:
        rig.deliver_all()
    finally:
        client("s3").meta.events.unregister("after-call.s3.GetObject", count)
    assert rig.statuses("big")["VanishingGradient"][0] == "IssuesFound"
    assert sum(bytes_read) < 2 * 1024 * 1024  # the index, collections and the gradient's records only
    rig.tally("big", [0])


def test_the_first_worker_s_end_marker_leaves_the_other_workers_steps_evaluated(rig: Rig) -> None:
    rig.register("two")
    rig.write_collections("two", num_workers=2)
    for s in range(3):
        rig.write_step("two", s, worker="worker_0", grad=1e-9 if s == 2 else 1.0)
    rig.write_step("two", 0, worker="worker_1")
    rig.write_end("two")
    rig.deliver_all()
    assert rig.describe_status("two") == "InProgress"
    for s in (1, 2):
        rig.write_step("two", s, worker="worker_1", grad=1e-9 if s == 2 else 1.0)
    rig.write_end("two")
    rig.deliver_all()
    assert rig.describe_status("two") == "Completed"
    assert rig.statuses("two")["VanishingGradient"][0] == "IssuesFound"
    rig.tally("two", [0, 1, 2])


def test_collections_claiming_two_workers_when_one_writes_is_not_no_issues_found(rig: Rig) -> None:
    rig.register("claims")
    rig.write_collections("claims", num_workers=2)
    for s in range(2):
        rig.write_step("claims", s)
    rig.write_end("claims")
    rig.deliver_all()
    rig.evaluator(clock_offset=END_GRACE_S + 60).scheduled_check()
    assert rig.describe_status("claims") == "Completed"
    status, details = rig.statuses("claims")["VanishingGradient"]
    assert status == "Error"  # every step incomplete: its data was broken
    assert details.startswith("VanishingGradient: evaluated 0 of 2 steps: 2 could not be read")
    records = rig.records("claims")
    assert all("incomplete: 1 of 2 workers" in r["step_error"] for r in records.values())
    rig.tally("claims", [0, 1])


def test_a_registration_racing_a_step_leaves_no_orphan(rig: Rig, monkeypatch: Any) -> None:
    rig.write_collections("race")
    rig.write_step("race", 0, grad=1e-9)
    coll, index = rig.notes()
    real = StepStore.record_orphan

    def registration_in_between(self: StepStore, *args: Any) -> None:
        rig.register("race")
        real(self, *args)

    monkeypatch.setattr(StepStore, "record_orphan", registration_in_between)
    assert rig.deliver(index)["action"] == "adopted"
    assert rig.statuses("race")["VanishingGradient"][0] == "IssuesFound"
    rig.tally("race", [0])


def test_a_state_change_of_90_rules_fits_eventbridge() -> None:
    params = {"p": "x" * 3000}
    rules = tuple(
        RuleState(
            RuleConfig(f"R{i}", "VanishingGradient", params, rule_parameters=params), RuleStatus.IN_PROGRESS
        )
        for i in range(90)
    )
    state = JobState(
        "j",
        "arn:aws:tornasole:us-east-1:000000000000:training-job/j",
        "s3://b/j",
        JobStatus.IN_PROGRESS,
        1,
        1,
        rules,
        hook_config={"S3OutputPath": "s3://b/j"},
    )
    payload = {
        "detail_type": DETAIL_TYPE_JOB_STATE_CHANGE,
        "resources": [state.arn],
        "detail": describe(state, "e"),
    }
    fitted = fit_event(payload, "j")
    import json

    assert len(json.dumps(payload["detail"])) > 256 * 1024
    assert len(json.dumps(fitted["detail"])) < EVENT_BUDGET_BYTES
    assert "tornasole jobs status j" in fitted["detail"]["TornasoleDetailTrimmed"]


def test_grace_periods_and_claims_outlast_the_functions() -> None:
    assert DEFAULT_SPEC.on_object_created.timeout_s * 1000 < PENDING_GRACE_MS
    assert 2 * DEFAULT_SPEC.on_object_created.timeout_s <= END_GRACE_S
    assert (
        max(DEFAULT_SPEC.publish_events.timeout_s, DEFAULT_SPEC.scheduled_check.timeout_s) * 1000
        < CLAIM_TIMEOUT_MS
    )

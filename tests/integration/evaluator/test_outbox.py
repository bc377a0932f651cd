"""Events within EventBridge's limit, each re-sent on its own, published once by a conditional claim."""

from __future__ import annotations

import json
from typing import Any

from evaluator_stack import TRIAL, Stack

from tornasole.aws.clients import client
from tornasole.evaluator.details import describe
from tornasole.evaluator.models import JobState, JobStatus, RuleConfig, RuleState, RuleStatus
from tornasole.evaluator.store.event_entries import EVENT_BUDGET_BYTES, TRIMMED_FIELD, entry_bytes, fit_event
from tornasole.evaluator.store.item_limits import EVENTBRIDGE_ENTRY_BYTES
from tornasole.evaluator.store.outbox import CLAIM_TIMEOUT_MS, OutboxItem, OutboxPublisher, outbox_put
from tornasole.evaluator.store.state_table import StateTable
from tornasole.jobs import TornasoleJobs
from tornasole.lambda_support.env import HandlerEnv
from tornasole.stack_spec import DETAIL_TYPE_JOB_STATE_CHANGE, EVENT_ID_FIELD

VG = {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"threshold": "0.001"}}


def big_state(rules: int = 90) -> JobState:
    params = {f"p{i}": "v" * 3000 for i in range(1)}
    configs = tuple(
        RuleConfig(f"Rule{i}", "VanishingGradient", params, rule_parameters=params) for i in range(rules)
    )
    return JobState(
        name="big-job",
        arn="arn:aws:tornasole:us-east-1:000000000000:training-job/big-job",
        trial_path="s3://b/big-job",
        status=JobStatus.IN_PROGRESS,
        seq=1,
        rules_rev=1,
        rules=tuple(
            RuleState(c, RuleStatus.ERROR, "x" * 1024, 1_700_000_000_000 + i) for i, c in enumerate(configs)
        ),
        hook_config={
            "S3OutputPath": "s3://b/big-job",
            "CollectionConfigurations": [
                {"CollectionName": f"c{i}", "CollectionParameters": {"include_regex": "r" * 500}}
                for i in range(100)
            ],
        },
    )


def payload_size(payload: dict[str, Any]) -> int:
    return entry_bytes(
        payload["detail_type"], json.dumps(payload["detail"], sort_keys=True), payload["resources"]
    )


def test_a_state_change_of_90_rules_is_trimmed_into_eventbridge_s_limit() -> None:
    state = big_state()
    payload = {
        "detail_type": DETAIL_TYPE_JOB_STATE_CHANGE,
        "resources": [state.arn],
        "detail": describe(state, "e1"),
    }
    assert payload_size(payload) > EVENTBRIDGE_ENTRY_BYTES  # as the issue measured: over the limit untrimmed
    fitted = fit_event(payload, state.name)
    assert payload_size(fitted) <= EVENT_BUDGET_BYTES
    detail = fitted["detail"]
    assert "tornasole jobs status big-job" in detail[TRIMMED_FIELD]
    assert detail[EVENT_ID_FIELD] == "e1"
    assert len(detail["DebugRuleEvaluationStatuses"]) == 90  # every rule's status is still there
    assert {s["RuleEvaluationStatus"] for s in detail["DebugRuleEvaluationStatuses"]} == {"Error"}
    small = {"detail_type": DETAIL_TYPE_JOB_STATE_CHANGE, "resources": [], "detail": {"a": 1}}
    assert fit_event(small, "j") is small


def put_raw_outbox(table: StateTable, job: str, eid: str, payload: dict[str, Any]) -> None:
    """An outbox row as an older version (no fitting) would have written it."""
    entry = outbox_put(table, job, OutboxItem(eid, "alert", payload), 0)["Put"]
    entry["Item"]["kind"] = {"S": "event"}
    client("dynamodb").put_item(TableName=entry["TableName"], Item=entry["Item"])


def test_one_unpublishable_event_does_not_block_the_other_re_sends(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    table = StateTable()
    huge = {"detail_type": DETAIL_TYPE_JOB_STATE_CHANGE, "resources": [], "detail": {"blob": "x" * 300_000}}
    put_raw_outbox(table, "my-job", "my-job:oversized", huge)
    publisher = OutboxPublisher.from_env(HandlerEnv.from_environ())
    assert len(publisher.unpublished()) == 2
    assert publisher.redrive(now_ms=10**13) == 1  # the registration event went out
    (left,) = publisher.unpublished()
    assert left["sk"] == "OUTBOX#my-job:oversized"
    assert "claimed" not in left  # the failed delivery released its claim
    assert [e["detail"][EVENT_ID_FIELD] for e in stack.events()] == ["my-job:1:job:InProgress"]


def test_overlapping_publishers_send_an_event_once_and_published_rows_expire(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    env = HandlerEnv.from_environ()
    stream, resend = OutboxPublisher.from_env(env), OutboxPublisher.from_env(env)
    (row,) = stream.unpublished()
    overlapped: list[bool] = []
    deliver = stream.deliver

    def deliver_while_the_resend_runs(item: dict[str, Any]) -> None:
        # the schedule's re-send reaches the same row while the stream's publisher is delivering it
        overlapped.append(resend.publish(row))
        overlapped.append(bool(resend.redrive(now_ms=10**13)))
        deliver(item)

    stream.deliver = deliver_while_the_resend_runs  # type: ignore[method-assign]
    assert stream.publish(row) is True
    assert overlapped == [False, False]
    assert len(stack.events()) == 1
    published = StateTable().get(row["pk"], row["sk"])
    assert published is not None
    assert published["expires_at"] > published["published"] // 1000  # the table's TTL attribute
    assert "gsi1pk" not in published
    assert stack.pump_stream() > 0  # the stream's copy of the insert finds it published
    assert stack.events() == []


def test_a_claim_held_by_a_dead_publisher_is_taken_over_once_stale(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    publisher = OutboxPublisher.from_env(HandlerEnv.from_environ())
    (row,) = publisher.unpublished()
    assert publisher.claim(row["pk"], row["sk"], now_ms=1_000) is not None  # then that publisher died
    assert publisher.publish(row) is True  # now is far past 1_000 + CLAIM_TIMEOUT_MS
    assert len(stack.events()) == 1
    assert publisher.claim(row["pk"], row["sk"], now_ms=10**13 + CLAIM_TIMEOUT_MS) is None  # published

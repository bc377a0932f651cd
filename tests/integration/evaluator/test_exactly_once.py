"""Exactly-once events across crashes: the outbox is written with the state, delivered at least once.

A crash between the DynamoDB write and PutEvents is the stream/publisher never
running; a crash after PutEvents and before the ``published`` mark is a second
delivery with the same ``TornasoleEventId``, which the consumer dedupes.
"""

from __future__ import annotations

import time

import pytest
from evaluator_stack import TRIAL, Stack, event_ids

from tornasole.aws.clients import client
from tornasole.evaluator.service import Evaluator
from tornasole.evaluator.store.outbox import OutboxPublisher, PublishError
from tornasole.evaluator.store.state_table import StateTable
from tornasole.jobs import Rule, TornasoleJobs
from tornasole.lambda_support.env import HandlerEnv

VG = Rule.sagemaker(
    {"DebugRuleConfiguration": {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {}}},
    rule_parameters={"threshold": "0.001"},
)


def run_job(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    stack.write_collections()
    stack.write_step(0)
    stack.write_step(5, grad=1e-6)
    stack.write_end()
    for note in stack.notifications():
        stack.deliver(note)


def later_evaluator(seconds: float) -> Evaluator:
    """The service as the scheduled check sees it ``seconds`` from now."""
    env = HandlerEnv.from_environ()
    return Evaluator(
        StateTable(env.state_table), OutboxPublisher.from_env(env), clock=lambda: time.time() + seconds
    )


VG_STRICT = {
    "RuleConfigurationName": "Strict",
    "RuleParameters": {"rule_to_invoke": "VanishingGradient", "threshold": "1e-30"},
}
EXPECTED = {
    "my-job:1:job:InProgress",
    "my-job:1:issue/VanishingGradient/5",
    "my-job:1:rule/VanishingGradient:IssuesFound",
    "my-job:1:job:Completed",
}


def test_crash_between_state_write_and_put_events_loses_nothing(stack: Stack) -> None:
    # GIVEN every transition committed, but the publisher never ran (the Lambda died after the write)
    run_job(stack)
    assert stack.events() == []
    assert len(StateTable().query("OUTBOX", "", index=True)) == len(EXPECTED)
    # WHEN the schedule re-drives items older than the grace period
    report = later_evaluator(120).scheduled_check()
    # THEN each event arrives once, and the late stream delivery adds nothing
    assert report.redriven == len(EXPECTED)
    stack.pump_stream()
    ids = event_ids(stack.events())
    assert sorted(ids) == sorted(EXPECTED)
    assert StateTable().query("OUTBOX", "", index=True) == []


def test_recent_items_are_left_to_the_stream(stack: Stack) -> None:
    run_job(stack)
    assert later_evaluator(0).scheduled_check().redriven == 0
    stack.pump_stream()
    assert sorted(event_ids(stack.events())) == sorted(EXPECTED)


def test_crash_after_put_events_redelivers_the_same_id(stack: Stack) -> None:
    # GIVEN an outbox item delivered once, then the Lambda died before marking it published
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    publisher = OutboxPublisher.from_env(HandlerEnv.from_environ())
    (item,) = publisher.unpublished()
    publisher.deliver(item)
    # WHEN the stream retries the batch
    stack.pump_stream()
    # THEN the subscriber got it twice with one id (it dedupes), and a third attempt is a no-op
    ids = event_ids(stack.events())
    assert ids == ["my-job:1:job:InProgress", "my-job:1:job:InProgress"]
    assert publisher.publish(item) is False
    assert stack.events() == []


def test_failed_put_events_entry_is_retried_not_lost(stack: Stack) -> None:
    # GIVEN a bus that rejects the entry (FailedEntryCount > 0)
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    events = client("events")
    targets = events.list_targets_by_rule(Rule="tornasole-local-all-events", EventBusName=stack.res.bus)[
        "Targets"
    ]
    rule = events.describe_rule(Name="tornasole-local-all-events", EventBusName=stack.res.bus)
    events.remove_targets(Rule=rule["Name"], EventBusName=stack.res.bus, Ids=[t["Id"] for t in targets])
    events.delete_rule(Name=rule["Name"], EventBusName=stack.res.bus)
    events.delete_event_bus(Name=stack.res.bus)
    streams = client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=stack.res.stream_arn)["StreamDescription"]["Shards"][0]
    it = streams.get_shard_iterator(
        StreamArn=stack.res.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=it)["Records"]
    # WHEN the publisher handles the stream batch
    resp = stack.publish.handler({"Records": records}, stack.context)
    # THEN the outbox record is reported failed (Lambda retries it) and stays unpublished
    failed = [f["itemIdentifier"] for f in resp["batchItemFailures"]]
    assert len(failed) == 1
    assert len(OutboxPublisher.from_env(HandlerEnv.from_environ()).unpublished()) == 1
    # AND once the bus is back the re-drive delivers it exactly once
    events.create_event_bus(Name=stack.res.bus)
    events.put_rule(
        Name=rule["Name"], EventBusName=stack.res.bus, EventPattern=rule["EventPattern"], State="ENABLED"
    )
    events.put_targets(Rule=rule["Name"], EventBusName=stack.res.bus, Targets=targets)
    assert later_evaluator(120).scheduled_check().redriven == 1
    assert event_ids(stack.events()) == ["my-job:1:job:InProgress"]


def test_same_step_processed_twice_emits_nothing_new(stack: Stack) -> None:
    # GIVEN a step whose notification is delivered, published, then delivered again (a Lambda retry)
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    stack.write_collections()
    stack.write_step(5, grad=1e-6)
    (collections, step5) = stack.notifications()
    stack.deliver(collections)
    assert stack.deliver(step5)["results"][0]["action"] == "evaluated"
    stack.pump_stream()
    first = event_ids(stack.events())
    # WHEN the same notification comes again
    again = stack.deliver(step5)["results"][0]
    stack.pump_stream()
    # THEN it is recognised, nothing is recorded twice and no event is emitted
    assert again["action"] == "duplicate"
    assert stack.events() == []
    assert first == [
        "my-job:1:job:InProgress",
        "my-job:1:issue/VanishingGradient/5",
        "my-job:1:rule/VanishingGradient:IssuesFound",
    ]
    records = TornasoleJobs().rule_evaluations("my-job", "VanishingGradient")
    assert [(r["step"], r["fired"]) for r in records] == [(5, True)]
    assert records[0]["values"]["threshold"] == 0.001


def test_failed_entry_count_is_a_failure(stack: Stack) -> None:
    # GIVEN a publisher whose entries EventBridge rejects one by one (moto: empty Source -> InvalidArgument)
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    env = HandlerEnv.from_environ()
    rejecting = OutboxPublisher(StateTable(env.state_table), env.event_bus, source="")
    (item,) = rejecting.unpublished()
    # WHEN it publishes THEN FailedEntryCount > 0 raises, and the item stays unpublished for a retry
    with pytest.raises(PublishError, match="InvalidArgument"):
        rejecting.publish(item)
    assert len(rejecting.unpublished()) == 1
    assert OutboxPublisher.from_env(env).publish(item) is True
    assert event_ids(stack.events()) == ["my-job:1:job:InProgress"]


class InjectedCrash(Exception):
    """The Lambda dies in the middle of a step (raised from a botocore hook, before the request is sent)."""


def test_crash_in_the_middle_of_a_step_then_retry_converges(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG, VG_STRICT])
    stack.write_collections()
    stack.write_step(5, grad=1e-6)
    collections, step5 = stack.notifications()
    stack.deliver(collections)
    # GIVEN the invocation dies after the step's evaluation records, at its first transition
    seen: list[str] = []

    def crash_on_second_transaction(**_: object) -> None:
        seen.append("tx")
        if len(seen) == 2:
            raise InjectedCrash("Lambda timed out")

    ddb = client("dynamodb")
    ddb.meta.events.register("before-call.dynamodb.TransactWriteItems", crash_on_second_transaction)
    with pytest.raises(InjectedCrash):
        stack.deliver(step5)
    ddb.meta.events.unregister("before-call.dynamodb.TransactWriteItems", crash_on_second_transaction)
    assert [s["RuleEvaluationStatus"] for s in TornasoleJobs().rule_job_summary("my-job")] == [
        "InProgress",
        "InProgress",
    ]
    # WHEN Lambda retries the same event
    assert stack.deliver(step5)["results"][0]["action"] == "evaluated"
    # THEN the state and the events are as if it had run once
    stack.pump_stream()
    assert sorted(event_ids(stack.events())) == sorted(
        [
            "my-job:1:job:InProgress",
            "my-job:1:issue/VanishingGradient/5",
            "my-job:1:rule/VanishingGradient:IssuesFound",
        ]
    )
    assert [r["step"] for r in TornasoleJobs().rule_evaluations("my-job", "VanishingGradient")] == [5]
    assert StateTable().query("PENDING", "", index=True) == []

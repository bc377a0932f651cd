"""The deployed stack, driven as a training job would: steps in, verdict in the table, events out."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tornasole.format.writer import StepWriter, TrialWriter
from tornasole.jobs import TornasoleJobs
from tornasole.modes import ModeKeys
from tornasole.stack_spec import DEFAULT_SPEC, END_MARKER_FILE, EVENT_ID_FIELD, JOB_CONFIG_FILE

VERDICT_TIMEOUT_S = 150
GRADIENTS = {0: 1.0, 5: 1e-6, 10: 1.0}  # VanishingGradient fires at step 5 only


def _queue_on(aws: Callable[[str], Any], name: str) -> tuple[str, str]:
    sqs = aws("sqs")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def _drain(aws: Callable[[str], Any], url: str) -> list[str]:
    sqs, bodies = aws("sqs"), []
    while msgs := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
        "Messages"
    ):
        for m in msgs:
            bodies.append(m["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return bodies


def _function_by_description(aws: Callable[[str], Any], fragment: str) -> dict[str, Any]:
    functions = aws("lambda").list_functions()["Functions"]
    return next(f for f in functions if fragment in f.get("Description", ""))


def test_deployed_resources_are_wired_as_synthesized(deployed, aws) -> None:
    out = deployed.outputs
    assert out["EventBusName"] == DEFAULT_SPEC.bus.name
    assert out["StateTableName"] == DEFAULT_SPEC.table.name
    assert "tornasole jobs register --name my-job" in out["RegisterJobCommand"]
    # CDK's notification custom resource really ran: step-file filters on the deployed bucket
    config = aws("s3").get_bucket_notification_configuration(Bucket=out["BucketName"])
    filters = sorted(
        tuple(sorted((r["Name"].lower(), r["Value"]) for r in c["Filter"]["Key"]["FilterRules"]))
        for c in config["LambdaFunctionConfigurations"]
    )
    assert filters == [
        (("prefix", "trials/"), ("suffix", ".json")),
        (("prefix", "trials/"), ("suffix", END_MARKER_FILE)),
    ]
    on_created = _function_by_description(aws, "S3 ObjectCreated")
    assert {c["LambdaFunctionArn"] for c in config["LambdaFunctionConfigurations"]} == {
        on_created["FunctionArn"]
    }
    assert on_created["Runtime"] == "python3.12"
    assert len(on_created["Layers"]) == 1
    # the outbox stream is consumed by publish_events, bisecting and parking poison batches
    publish = _function_by_description(aws, "DynamoDB stream")
    (mapping,) = aws("lambda").list_event_source_mappings(FunctionName=publish["FunctionName"])[
        "EventSourceMappings"
    ]
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["DestinationConfig"]["OnFailure"]["Destination"].endswith(
        out["FailureQueueUrl"].rsplit("/", 1)[-1]
    )


def test_a_training_run_is_evaluated_by_the_deployed_stack(deployed, aws) -> None:
    out = deployed.outputs
    bucket, bus = out["BucketName"], out["EventBusName"]
    # GIVEN an SQS queue subscribed to the deployed bus, and one to the status (alert) topic
    events_url, events_arn = _queue_on(aws, "deploy-test-events")
    aws("events").put_rule(
        Name="deploy-test-capture",
        EventBusName=bus,
        EventPattern=json.dumps({"source": [DEFAULT_SPEC.bus.source]}),
    )
    aws("events").put_targets(
        Rule="deploy-test-capture", EventBusName=bus, Targets=[{"Id": "capture", "Arn": events_arn}]
    )
    alerts_url, alerts_arn = _queue_on(aws, "deploy-test-alerts")
    aws("sns").subscribe(
        TopicArn=out["StatusTopicArn"],
        Protocol="sqs",
        Endpoint=alerts_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    # WHEN a training job registers itself with its config file and writes 3 steps and its end marker
    job = f"deploy-{int(time.time())}"
    trial = f"s3://{bucket}/{out['TrialPrefix']}{job}"
    config = {
        "TrainingJobName": job,
        "S3OutputPath": trial,
        "DebugRuleConfigurations": [
            {
                "RuleConfigurationName": "VanishingGradient",
                "RuleParameters": {"rule_to_invoke": "VanishingGradient", "threshold": "0.001"},
            },
        ],
    }
    started = time.monotonic()
    aws("s3").put_object(
        Bucket=bucket, Key=f"{out['TrialPrefix']}{job}/{JOB_CONFIG_FILE}", Body=json.dumps(config).encode()
    )
    writer = TrialWriter(trial)
    writer.write_collections({"gradients": {"name": "gradients", "include_regex": ["gradients/.*"]}}, 1)
    for step, grad in GRADIENTS.items():
        sw = StepWriter(step, "worker_0", mode=ModeKeys.TRAIN, mode_step=step)
        sw.add_tensor("gradients/fc.weight", np.full((4, 4), grad, dtype=np.float32), wall_time=1.0)
        writer.write_step(sw)
    writer.write_end_marker()
    # THEN the deployed Lambdas evaluate it: the verdict is in the deployed table ...
    jobs = TornasoleJobs(table_name=out["StateTableName"])
    described: dict[str, Any] = {}
    while time.monotonic() - started < VERDICT_TIMEOUT_S:
        try:
            described = jobs.describe(job)
        except LookupError:
            described = {}
        if described.get("TrainingJobStatus") == "Completed":
            break
        time.sleep(2)
    else:
        failures = _drain(aws, out["FailureQueueUrl"])
        pytest.fail(
            f"job not Completed after {VERDICT_TIMEOUT_S}s: {described}\nparked failures: {failures}\n"
            f"--- MiniStack log ---\n{deployed.ministack.tail(80)}"
        )
    (rule,) = described["DebugRuleEvaluationStatuses"]
    assert rule["RuleEvaluationStatus"] == "IssuesFound"
    assert "step 5" in rule["StatusDetails"]
    # ... and every transition reached the queue on the deployed bus, exactly once
    expected = {
        f"{job}:1:job:InProgress",
        f"{job}:1:issue/VanishingGradient/5",
        f"{job}:1:rule/VanishingGradient:IssuesFound",
        f"{job}:1:job:Completed",
    }
    ids: list[str] = []
    while time.monotonic() - started < VERDICT_TIMEOUT_S + 30 and set(ids) != expected:
        ids += [json.loads(b)["detail"][EVENT_ID_FIELD] for b in _drain(aws, events_url)]
    assert sorted(ids) == sorted(expected)
    # ... and the IssuesFound transition reached the alert topic as a readable sentence
    alerts = _drain(aws, alerts_url)
    assert any(f"training job {job}" in a and "IssuesFound" in a for a in alerts), alerts
    print(f"\nrun evaluated and published in {time.monotonic() - started:.1f}s")


def test_the_scheduled_check_runs_in_the_deployed_function(deployed, aws) -> None:
    # GIVEN the event the deployed schedule rule sends every few minutes
    scheduled = _function_by_description(aws, "Schedule:")
    rule = next(r for r in aws("events").list_rules()["Rules"] if r.get("ScheduleExpression"))
    assert rule["ScheduleExpression"] == DEFAULT_SPEC.schedule_expression
    event = {
        "version": "0",
        "id": "00000000-0000-0000-0000-000000000000",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "000000000000",
        "time": "2026-11-22T00:00:00Z",
        "region": "us-east-1",
        "resources": [rule["Arn"]],
        "detail": {},
    }
    # WHEN the deployed function is invoked with it THEN it completes and reports what it checked
    resp = aws("lambda").invoke(FunctionName=scheduled["FunctionName"], Payload=json.dumps(event).encode())
    payload = json.loads(resp["Payload"].read())
    assert "FunctionError" not in resp, payload
    assert payload["errors"] == [], payload
    assert {"jobs", "stalled", "completed", "redriven"} <= set(payload)

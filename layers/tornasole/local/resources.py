"""Create the stack's resources inside a moto endpoint, from ``tornasole.stack_spec``.

Names and settings come from the same ``StackSpec`` the CDK app reads, so the
local pipeline and the deployed one cannot drift apart. Where moto cannot do
what AWS does (S3 -> Lambda, stream -> Lambda, EventBridge -> SNS), the
resources route to SQS queues that the dispatcher drains.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tornasole.alerts.destinations import DETAIL_TYPE_ALERT
from tornasole.aws.clients import client
from tornasole.stack_spec import DEFAULT_SPEC, SAGEMAKER_END_EVENT_PATTERN, StackSpec

__all__ = ["LocalResources", "create_resources"]

NOTIFICATION_QUEUE = "tornasole-local-s3-notifications"
EVENTS_QUEUE = "tornasole-local-events"
ALERTS_QUEUE = "tornasole-local-alerts"
EVENTS_RULE = "tornasole-local-all-events"
SAGEMAKER_QUEUE = "tornasole-local-sagemaker-events"
SAGEMAKER_RULE = "tornasole-local-sagemaker-ended"
ALERT_DESTINATIONS_QUEUE = "tornasole-local-alert-destinations"
ALERT_DESTINATIONS_RULE = "tornasole-local-alert-destinations"


@dataclass(frozen=True)
class LocalResources:
    """What ``create_resources`` made: names, ARNs and queue URLs the dispatcher needs."""

    bucket: str
    table: str
    stream_arn: str
    bus: str
    topic_arn: str
    notification_queue_url: str
    events_queue_url: str
    alerts_queue_url: str
    # SageMaker's training-job state changes on the default bus (``stack_spec.SAGEMAKER_END_EVENT_PATTERN``)
    sagemaker_events_queue_url: str = ""
    # ``Tornasole Alert`` events (webhook/slack/teams actions), which the local sender POSTs
    alert_destinations_queue_url: str = ""


def _queue(sqs: Any, name: str) -> tuple[str, str]:
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def _create_table(spec: StackSpec) -> str:
    ddb = client("dynamodb")
    t = spec.table
    try:
        desc = ddb.describe_table(TableName=t.name)["Table"]
        return desc["LatestStreamArn"]
    except ddb.exceptions.ResourceNotFoundException:
        pass
    attrs = {t.partition_key, t.sort_key, t.gsi.partition_key, t.gsi.sort_key}
    desc = ddb.create_table(
        TableName=t.name,
        BillingMode=t.billing_mode,
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in sorted(attrs)],
        KeySchema=[
            {"AttributeName": t.partition_key, "KeyType": "HASH"},
            {"AttributeName": t.sort_key, "KeyType": "RANGE"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": t.gsi.name,
                "KeySchema": [
                    {"AttributeName": t.gsi.partition_key, "KeyType": "HASH"},
                    {"AttributeName": t.gsi.sort_key, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": t.gsi.projection},
            }
        ],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": t.stream_view_type},
    )["TableDescription"]
    ddb.update_time_to_live(
        TableName=t.name, TimeToLiveSpecification={"Enabled": True, "AttributeName": t.ttl_attribute}
    )
    return desc["LatestStreamArn"]


def create_resources(bucket: str, spec: StackSpec = DEFAULT_SPEC) -> LocalResources:
    """Create (idempotently) bucket, table, bus, topic and the local routing queues."""
    s3, sqs, events, sns = client("s3"), client("sqs"), client("events"), client("sns")
    s3.create_bucket(Bucket=bucket)
    stream_arn = _create_table(spec)

    notif_url, notif_arn = _queue(sqs, NOTIFICATION_QUEUE)
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={
            "QueueConfigurations": [
                {
                    "Id": f"tornasole-{i}",
                    "QueueArn": notif_arn,
                    "Events": ["s3:ObjectCreated:*"],
                    "Filter": {
                        "Key": {
                            "FilterRules": [{"Name": "suffix", "Value": suffix}]
                            + (
                                [{"Name": "prefix", "Value": spec.notifications.prefix}]
                                if spec.notifications.prefix
                                else []
                            )
                        }
                    },
                }
                for i, suffix in enumerate(spec.notifications.suffixes)
            ]
        },
    )

    bus = spec.bus.name
    if bus not in {b["Name"] for b in events.list_event_buses()["EventBuses"]}:
        events.create_event_bus(Name=bus)
    events_url, events_arn = _queue(sqs, EVENTS_QUEUE)
    events.put_rule(
        Name=EVENTS_RULE,
        EventBusName=bus,
        EventPattern=json.dumps({"source": [spec.bus.source]}),
        State="ENABLED",
    )
    events.put_targets(
        Rule=EVENTS_RULE, EventBusName=bus, Targets=[{"Id": "local-events", "Arn": events_arn}]
    )

    # SageMaker's own events reach the default bus; the stack's rule matches them there (as deployed)
    sagemaker_url, sagemaker_arn = _queue(sqs, SAGEMAKER_QUEUE)
    events.put_rule(
        Name=SAGEMAKER_RULE, EventPattern=json.dumps(SAGEMAKER_END_EVENT_PATTERN), State="ENABLED"
    )
    events.put_targets(Rule=SAGEMAKER_RULE, Targets=[{"Id": "local-sagemaker", "Arn": sagemaker_arn}])

    # webhook/slack/teams alerts: as the stack's per-destination rules match them (DETAIL_TYPE_ALERT)
    destinations_url, destinations_arn = _queue(sqs, ALERT_DESTINATIONS_QUEUE)
    events.put_rule(
        Name=ALERT_DESTINATIONS_RULE,
        EventBusName=bus,
        EventPattern=json.dumps({"source": [spec.bus.source], "detail-type": [DETAIL_TYPE_ALERT]}),
        State="ENABLED",
    )
    events.put_targets(
        Rule=ALERT_DESTINATIONS_RULE,
        EventBusName=bus,
        Targets=[{"Id": "local-alert-destinations", "Arn": destinations_arn}],
    )

    topic_arn = sns.create_topic(Name=spec.alerts.topic_name)["TopicArn"]
    alerts_url, alerts_arn = _queue(sqs, ALERTS_QUEUE)
    sns.subscribe(
        TopicArn=topic_arn, Protocol="sqs", Endpoint=alerts_arn, Attributes={"RawMessageDelivery": "false"}
    )
    return LocalResources(
        bucket=bucket,
        table=spec.table.name,
        stream_arn=stream_arn,
        bus=bus,
        topic_arn=topic_arn,
        notification_queue_url=notif_url,
        events_queue_url=events_url,
        alerts_queue_url=alerts_url,
        sagemaker_events_queue_url=sagemaker_url,
        alert_destinations_queue_url=destinations_url,
    )

"""DynamoDB stream of the state table -> drain the transactional outbox.

Every status transition was written in ONE transaction together with its
outbox item; this function only sees stream records, picks the outbox items
and asks the library's ``OutboxPublisher`` to deliver each (PutEvents with the
deterministic ``TornasoleEventId``, SNS alerts, stop signals) and mark it
published under a condition. Failures are reported per record
(ReportBatchItemFailures) so one bad item never blocks the shard.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from tornasole.evaluator.store.outbox import OutboxPublisher
from tornasole.lambda_support.env import HandlerEnv
from tornasole.lambda_support.observability import inject_invocation_context, metrics, tracer

processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


@cache
def publisher() -> OutboxPublisher:
    return OutboxPublisher.from_env(HandlerEnv.from_environ())


def record_handler(record: DynamoDBRecord) -> None:
    keys = record.dynamodb.keys if record.dynamodb else None
    if not keys or not publisher().is_outbox_key(keys):
        return
    if publisher().publish(keys):
        metrics.add_metric(name="OutboxPublished", unit=MetricUnit.Count, value=1)


@inject_invocation_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )

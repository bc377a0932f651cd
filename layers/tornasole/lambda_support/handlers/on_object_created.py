"""S3 ObjectCreated -> the evaluator (index files, collections files, end marker, tornasole_job.json).

A thin adapter: decode each record's key (S3 URL-encodes it, moto even encodes
``/``), hand ``(bucket, key)`` to ``Evaluator.handle_object_created`` and count
what happened. Bad input is recorded by the evaluator, not raised; anything
raised here is a real failure and goes to Lambda's retry / DLQ.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes import S3Event, event_source
from aws_lambda_powertools.utilities.typing import LambdaContext

from tornasole.evaluator.service import Evaluator
from tornasole.lambda_support.env import HandlerEnv
from tornasole.lambda_support.observability import inject_invocation_context, logger, metrics, tracer


def event_time_s(value: str | None) -> float | None:
    """S3's ``eventTime`` (when the object was written; a re-delivery carries the same) as epoch seconds."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        logger.warning("unreadable S3 eventTime %r", value)
        return None


@cache
def evaluator() -> Evaluator:
    """Built once per cold start (no client is created until first use)."""
    return Evaluator.from_env(HandlerEnv.from_environ())


@inject_invocation_context
@tracer.capture_lambda_handler
@metrics.log_metrics
@event_source(data_class=S3Event)
def handler(event: S3Event, context: LambdaContext) -> dict[str, Any]:
    results = []
    for record in event.records:
        key = unquote_plus(record.s3.get_object.key)
        result = evaluator().handle_object_created(
            record.s3.bucket.name,
            key,
            remaining_s=lambda: context.get_remaining_time_in_millis() / 1000,
            written_s=event_time_s(record.event_time),
        )
        logger.info("object handled", extra=result.to_dict())
        if result.action == "evaluated" and result.kind == "profiler":  # a profiler file, not a step
            metrics.add_metric(name="ProfilerFilesEvaluated", unit=MetricUnit.Count, value=1)
        elif result.action == "evaluated":
            metrics.add_metric(name="StepsEvaluated", unit=MetricUnit.Count, value=1)
            metrics.add_metric(name="IssuesFound", unit=MetricUnit.Count, value=result.issues_found)
            for outcome in result.outcomes:
                metrics.add_metric(name="RuleLatency", unit=MetricUnit.Milliseconds, value=outcome.latency_ms)
                if outcome.error:
                    metrics.add_metric(name="RuleErrors", unit=MetricUnit.Count, value=1)
        results.append(result.to_dict())
    return {"results": results}

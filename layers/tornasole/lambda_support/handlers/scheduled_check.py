"""EventBridge schedule -> the evaluator's periodic check.

Marks ``StalledTrainingRule`` rules ``IssuesFound`` for jobs with no new step
for their ``threshold`` seconds, completes jobs whose end marker was seen and
whose steps are all evaluated, re-evaluates steps left pending by a crashed
invocation, and re-drives outbox items that were never published.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent, event_source
from aws_lambda_powertools.utilities.typing import LambdaContext

from tornasole.evaluator.service import Evaluator
from tornasole.lambda_support.env import HandlerEnv
from tornasole.lambda_support.observability import inject_invocation_context, logger, metrics, tracer


@cache
def evaluator() -> Evaluator:
    return Evaluator.from_env(HandlerEnv.from_environ())


@inject_invocation_context
@tracer.capture_lambda_handler
@metrics.log_metrics
@event_source(data_class=EventBridgeEvent)
def handler(event: EventBridgeEvent, context: LambdaContext) -> dict[str, Any]:
    report = evaluator().scheduled_check(remaining_s=lambda: context.get_remaining_time_in_millis() / 1000)
    logger.info("scheduled check", extra=report.to_dict())
    metrics.add_metric(name="StalledRulesFired", unit=MetricUnit.Count, value=report.stalled)
    metrics.add_metric(name="JobsCompleted", unit=MetricUnit.Count, value=report.completed)
    metrics.add_metric(name="OutboxRedriven", unit=MetricUnit.Count, value=report.redriven)
    return report.to_dict()

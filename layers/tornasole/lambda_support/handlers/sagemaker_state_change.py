"""SageMaker's "SageMaker Training Job State Change" event (default bus, source ``aws.sagemaker``) -> the
evaluator settles the job of that name (``evaluator.completion.EndOfTraining.training_state_change``).

Why: on SageMaker the hook writes no end marker; SageMaker's own event is the end of training. An event of
another shape is logged and answered ``invalid`` (a retry would not change it), never raised.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from tornasole.evaluator.service import Evaluator
from tornasole.lambda_support.env import HandlerEnv
from tornasole.lambda_support.observability import inject_invocation_context, logger, tracer


@cache
def evaluator() -> Evaluator:
    return Evaluator.from_env(HandlerEnv.from_environ())


@inject_invocation_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    result = evaluator().training_state_change(event)
    logger.info("SageMaker training job state change", extra=result)
    return result

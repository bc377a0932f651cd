"""SageMaker's "SageMaker Training Job State Change" event, made and put on the local endpoint's default bus.

Why: a job trained on SageMaker ends by SageMaker's own event, never by an end marker. The local mode routes
that event exactly as the deployed stack does (a rule on the default bus -> ``sagemaker_state_change``), and
``tornasole local sagemaker-event`` delivers one, so the path is exercised end to end. EventBridge itself
refuses ``aws.*`` sources from ``PutEvents``, so this only works against the local endpoint.
"""

from __future__ import annotations

import json
import time
from typing import Any

from tornasole.stack_spec import DETAIL_TYPE_JOB_STATE_CHANGE, SAGEMAKER_SOURCE

__all__ = ["END_STATUSES", "deliver", "training_job_state_change"]

END_STATUSES = ("Completed", "Failed", "Stopped")


def training_job_state_change(
    name: str, status: str, failure_reason: str | None = None, now_ms: int | None = None
) -> dict[str, Any]:
    """The ``PutEvents`` entry of SageMaker's event (its detail as ``DescribeTrainingJob`` spells it)."""
    now = str(now_ms if now_ms is not None else int(time.time() * 1000))
    detail: dict[str, Any] = {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:000000000000:training-job/{name}",
        "TrainingJobStatus": status,
        "SecondaryStatus": status,
        "LastModifiedTime": now,
    }
    if status in END_STATUSES:
        detail["TrainingEndTime"] = now
    if failure_reason:
        detail["FailureReason"] = failure_reason
    return {
        "Source": SAGEMAKER_SOURCE,
        "DetailType": DETAIL_TYPE_JOB_STATE_CHANGE,
        "Resources": [detail["TrainingJobArn"]],
        "Detail": json.dumps(detail),
    }


def deliver(entry: dict[str, Any], events_client: Any = None) -> str:
    """Put ``entry`` on the default bus; its EventId, or a ``RuntimeError`` with EventBridge's reason."""
    if events_client is None:
        from tornasole.aws.clients import client

        events_client = client("events")
    resp = events_client.put_events(Entries=[entry])
    result = resp["Entries"][0]
    if resp.get("FailedEntryCount") or "EventId" not in result:
        raise RuntimeError(
            f"EventBridge refused the event: {result.get('ErrorCode')}: {result.get('ErrorMessage')} "
            "(SageMaker's events can only be delivered to the local endpoint: `tornasole local up`)"
        )
    return str(result["EventId"])

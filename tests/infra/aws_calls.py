"""Record every AWS call a handler makes, as the IAM actions (and keys) AWS authorizes it by.

Why a patch of ``BaseClient._make_api_call``: every boto3 call of every cached client passes
through it, whichever thread makes it (the readers fetch ranges from a pool), so one hook sees them
all. Calls made while no handler runs (the test writing trials, registering jobs, reading
notifications) belong to nobody and are not recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from botocore.client import BaseClient

__all__ = ["AwsCall", "CallRecorder"]

# Operations AWS authorizes under another action's name.
_S3_ACTIONS = {"HeadObject": "GetObject", "ListObjectsV2": "ListBucket", "ListObjects": "ListBucket"}
# A transaction is authorized item by item, by the action each item performs.
_TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}


@dataclass(frozen=True)
class AwsCall:
    """One authorized action: ``s3:GetObject`` on a key, ``dynamodb:PutItem`` on a partition key, ..."""

    function: str
    action: str
    #: The S3 key, the DynamoDB partition key value (None when the call names none, e.g. a GSI query),
    #: the DynamoDB index queried, or the target ARN / bus.
    resource: str | None = None
    index: str | None = None


def _pk(key: dict[str, Any] | None) -> str | None:
    if not key or "pk" not in key:
        return None
    return next(iter(key["pk"].values()))


def _query_pk(params: dict[str, Any]) -> str | None:
    """The partition key value of a Query on the table (its ``pk = :x`` condition)."""
    values = params.get("ExpressionAttributeValues", {})
    expr = params.get("KeyConditionExpression", "")
    names = {v: k for k, v in params.get("ExpressionAttributeNames", {}).items()}
    for part in expr.split(" AND "):
        left, _, right = part.partition("=")
        name = left.strip()
        if names.get("pk") == name or name == "pk":
            return next(iter(values[right.strip()].values()))
    return None


def expand(function: str, service: str, operation: str, params: dict[str, Any]) -> list[AwsCall]:
    """The IAM actions one API call is authorized by."""
    if service == "s3":
        resource = params.get("Key", params.get("Prefix"))
        return [AwsCall(function, f"s3:{_S3_ACTIONS.get(operation, operation)}", resource)]
    if service in ("dynamodb", "dynamodbstreams"):
        if operation == "TransactWriteItems" or operation == "TransactGetItems":
            out = []
            for entry in params["TransactItems"]:
                ((kind, body),) = entry.items()
                key = body.get("Key") or body.get("Item")
                out.append(AwsCall(function, f"dynamodb:{_TRANSACT_ACTIONS[kind]}", _pk(key)))
            return out
        if operation == "BatchGetItem":
            return [
                AwsCall(function, "dynamodb:BatchGetItem", _pk(k))
                for table in params["RequestItems"].values()
                for k in table["Keys"]
            ]
        if operation == "Query":
            index = params.get("IndexName")
            return [AwsCall(function, "dynamodb:Query", None if index else _query_pk(params), index)]
        key = params.get("Key") or params.get("Item")
        return [AwsCall(function, f"dynamodb:{operation}", _pk(key))]
    if service == "events":
        return [AwsCall(function, f"events:{operation}")]
    if service == "sns":
        return [AwsCall(function, f"sns:{operation}", params.get("TopicArn"))]
    if service == "lambda":
        action = "InvokeFunction" if operation == "Invoke" else operation
        return [AwsCall(function, f"lambda:{action}", params.get("FunctionName"))]
    if service == "sts":
        return [AwsCall(function, f"sts:{operation}", params.get("RoleArn"))]
    return [AwsCall(function, f"{service}:{operation}")]


@dataclass
class CallRecorder:
    """Who called what: ``with recorder.calls_of("on_object_created"): handler(...)``."""

    calls: list[AwsCall] = field(default_factory=list)
    _current: str | None = None

    def calls_of(self, function: str) -> Any:
        @contextmanager
        def scope() -> Iterator[None]:
            previous, self._current = self._current, function
            try:
                yield
            finally:
                self._current = previous

        return scope()

    def actions(self, function: str) -> set[str]:
        return {c.action for c in self.calls if c.function == function}

    def of(self, function: str, action: str) -> list[AwsCall]:
        return [c for c in self.calls if c.function == function and c.action == action]

    @contextmanager
    def installed(self) -> Iterator[CallRecorder]:
        original: Callable[..., Any] = BaseClient._make_api_call
        recorder = self

        def recording(client: BaseClient, operation_name: str, api_params: dict[str, Any]) -> Any:
            if recorder._current is not None:
                service = client.meta.service_model.service_name
                recorder.calls.extend(expand(recorder._current, service, operation_name, api_params))
            return original(client, operation_name, api_params)

        BaseClient._make_api_call = recording  # type: ignore[method-assign]
        try:
            yield self
        finally:
            BaseClient._make_api_call = original  # type: ignore[method-assign]

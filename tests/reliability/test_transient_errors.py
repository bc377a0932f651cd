"""Transient S3, DynamoDB and EventBridge errors, injected into the real clients' calls.

Each error is what AWS returns under load (S3 ``SlowDown`` 503, DynamoDB
``ProvisionedThroughputExceededException`` / ``ThrottlingException``, EventBridge
``ThrottlingException`` 400, a 500 ``InternalError``), raised ``times`` times from
a botocore ``before-call`` hook. The failed invocation raises (Lambda retries it);
nothing is turned into a rule ``Error``; once the errors stop, the end state is the
error-free one and every event went out exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from botocore.exceptions import ClientError
from reliability_rig import Rig

from tornasole.aws.clients import client

JOB = "transient"


@contextmanager
def failing(service: str, op: str, code: str, status: int, times: int) -> Iterator[list[str]]:
    hits: list[str] = []

    def fail(*_: Any, **__: Any) -> None:
        if len(hits) < times:
            hits.append(op)
            error = {"Code": code, "Message": "injected"}
            raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": status}}, op)

    events = client(service).meta.events
    events.register(f"before-call.{service}.{op}", fail)
    try:
        yield hits
    finally:
        events.unregister(f"before-call.{service}.{op}", fail)


CASES = {
    "S3 GetObject SlowDown 503": ("s3", "GetObject", "SlowDown", 503, 2),
    "S3 GetObject InternalError 500": ("s3", "GetObject", "InternalError", 500, 1),
    "DynamoDB UpdateItem throughput exceeded": (
        "dynamodb",
        "UpdateItem",
        "ProvisionedThroughputExceededException",
        400,
        2,
    ),
    "DynamoDB TransactWriteItems throttled": (
        "dynamodb",
        "TransactWriteItems",
        "ThrottlingException",
        400,
        1,
    ),
    "DynamoDB Query 500": ("dynamodb", "Query", "InternalServerError", 500, 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_transient_aws_error_is_retried_not_recorded(rig: Rig, name: str) -> None:
    service, op, code, status, times = CASES[name]
    rig.register(JOB)
    rig.write_collections(JOB)
    rig.write_step(JOB, 0)
    rig.write_step(JOB, 1, grad=1e-9)
    rig.write_end(JOB)
    notes = rig.notes()
    failed, why = 0, ""
    with failing(service, op, code, status, times) as hits:
        for note in notes:
            for _ in range(times + 1):  # the invocation and Lambda's retries
                try:
                    rig.deliver(note)
                    break
                except Exception as exc:  # noqa: BLE001 - what Lambda sees: the invocation failed
                    failed += 1
                    why = repr(exc) + repr(exc.__cause__)
    assert code in why
    assert hits
    assert failed >= 1
    rig.settle(JOB)
    assert rig.describe_status(JOB) == "Completed"
    records = rig.records(JOB)
    assert {s: (r["fired"], r.get("error"), r.get("step_error")) for s, r in records.items()} == {
        0: (False, None, None),
        1: (True, None, None),
    }
    assert rig.statuses(JOB)["VanishingGradient"][0] == "IssuesFound"
    rig.tally(JOB, [0, 1])
    rig.count_duplicates(rig.events())


def test_a_throttled_put_events_is_retried_and_sent_once(rig: Rig) -> None:
    rig.register(JOB)
    with failing("events", "PutEvents", "ThrottlingException", 400, 2) as hits:
        report = rig.evaluator(clock_offset=3600).scheduled_check()  # the re-send path
        assert report.redriven == 0
        with pytest.raises(BatchProcessingError, match="All records failed"):
            rig.pump()  # the stream path: the batch fails (Lambda retries it)
    assert hits == ["PutEvents"] * 2
    assert rig.evaluator(clock_offset=3600).scheduled_check().redriven == 1
    ids = rig.count_duplicates(rig.events())
    assert ids == [f"{JOB}:1:job:InProgress"]
    rig.pump()
    assert rig.events() == []

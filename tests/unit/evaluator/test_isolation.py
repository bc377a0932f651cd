"""Rule isolation, failure classes and service limits, without AWS."""

from __future__ import annotations

import json
import sys
import threading
import time

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from tornasole.evaluator.failures import TransientError, is_data_error, is_transient
from tornasole.evaluator.sandbox.isolation import (
    Budget,
    RuleDeadlineExceeded,
    RuleExit,
    RuleMemoryExceeded,
    guarded,
)
from tornasole.evaluator.store.item_limits import (
    DYNAMODB_ITEM_BYTES,
    MAX_VALUES_BYTES,
    ItemTooLarge,
    cap_values,
    check_item,
    item_bytes,
)
from tornasole.exceptions import FormatError


def test_exit_and_keyboard_interrupt_from_a_rule_become_its_error() -> None:
    with pytest.raises(RuleExit, match="SystemExit: 3"):
        guarded(lambda: sys.exit(3), Budget(5))

    def interrupt() -> None:
        raise KeyboardInterrupt

    with pytest.raises(RuleExit, match="KeyboardInterrupt"):
        guarded(interrupt, Budget(5))
    assert guarded(lambda: 42, Budget(5)) == 42


def test_a_looping_rule_is_stopped_at_its_deadline_even_if_it_swallows_errors() -> None:
    def loop() -> None:
        while True:
            try:
                sum(range(100))
            except Exception:  # noqa: BLE001, S112 - what a careless rule does
                continue

    start = time.monotonic()
    with pytest.raises(RuleDeadlineExceeded, match="deadline of 0.3s"):
        guarded(loop, Budget(0.3))
    assert time.monotonic() - start < 3
    for t in threading.enumerate():  # the watchdog is gone once the rule is stopped
        if t.name == "tornasole-rule-watchdog":
            t.join(2)
            assert not t.is_alive()


def test_a_rule_allocating_without_bound_is_stopped_by_its_memory_budget() -> None:
    def allocate() -> None:
        hoard = []
        while True:
            hoard.append(bytearray(4 * 1024 * 1024))

    with pytest.raises(RuleMemoryExceeded, match="budget of 64 MiB"):
        guarded(allocate, Budget(30, memory_bytes=64 * 1024 * 1024))


def test_the_deadline_is_cut_to_the_invocation_s_remaining_time() -> None:
    assert Budget(60).within(None, 15).seconds == 60
    assert Budget(60).within(40, 15).seconds == 25
    assert Budget(60).within(5, 15).seconds == 0.1


def s3_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject"
    )


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (s3_error("SlowDown", 503), True),
        (s3_error("ProvisionedThroughputExceededException", 400), True),
        (s3_error("ThrottlingException", 400), True),
        (s3_error("InternalError", 500), True),
        (EndpointConnectionError(endpoint_url="https://s3"), True),
        (s3_error("NoSuchKey", 404), False),
        (s3_error("AccessDenied", 403), False),
        (ValueError("bad"), False),
    ],
)
def test_transient_errors_are_recognised_through_the_cause_chain(exc: Exception, transient: bool) -> None:
    wrapped = OSError(5, "S3 error")
    wrapped.__cause__ = exc
    outer = FormatError("cannot load index file", path="s3://b/k")
    outer.__cause__ = wrapped
    assert is_transient(exc) is transient
    assert is_transient(outer) is transient
    assert is_transient(TransientError("x"))
    assert is_data_error(outer)
    assert not is_data_error(ZeroDivisionError())


def test_dynamodb_item_size_is_counted_and_enforced() -> None:
    small = {"pk": {"S": "JOB#j"}, "n": {"N": "12345"}, "flag": {"BOOL": True}}
    assert item_bytes(small) == 2 + 5 + 1 + 4 + 4 + 1
    big = {"pk": {"S": "x"}, "values": {"S": "a" * DYNAMODB_ITEM_BYTES}}
    with pytest.raises(ItemTooLarge, match="exceeds DynamoDB's 409600-byte limit"):
        check_item(big, "EVAL#R#000000000001")


def test_rule_values_are_capped_with_a_marked_preview() -> None:
    assert json.loads(cap_values({"v": 1.5})) == {"v": 1.5}
    capped = json.loads(cap_values({"blob": "x" * (MAX_VALUES_BYTES * 10)}))
    assert capped["values_truncated"] is True
    assert capped["values_bytes"] > MAX_VALUES_BYTES * 10
    assert len(json.dumps(capped)) < 2 * 1024
    nested: dict = {}
    cur = nested
    for _ in range(100_000):
        cur["a"] = {}
        cur = cur["a"]
    assert "values_unavailable" in json.loads(cap_values(nested))
    loop: dict = {}
    loop["self"] = loop
    assert "values_unavailable" in json.loads(cap_values(loop))

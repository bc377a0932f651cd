"""Each correctness patch fixes a defect moto has under concurrent requests (MOTO_UPSTREAM.md U1, U2, U10).

Each defect is shown on moto as it is, then fixed by the patch: the two requests
are interleaved deterministically (the first waits inside moto for the second),
so the defect shows every time rather than by chance. If an upstream release
fixes one, its ``..._as_moto_is`` test fails: the patch can then be retired.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tornasole.local.moto_patches import dynamodb_request_lock, s3_request_lock, sqs_one_receiver

TABLE = "lock-t"
WAIT_S = 2.0  # how long the first request waits inside moto for the second one


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


def _table() -> Any:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk")],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    )
    ddb.put_item(TableName=TABLE, Item={"pk": {"S": "job"}, "sk": {"S": "done"}})
    return ddb


def _in_a_thread(work: Callable[[], Any]) -> threading.Thread:
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def _write_during_a_cancelled_transaction(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """A transaction whose condition fails, and another thread's PutItem made while it runs."""
    from moto.dynamodb.models import DynamoDBBackend

    ddb = _table()
    other = boto3.client("dynamodb", region_name="us-east-1")
    transaction_thread: list[int] = []
    inside, written = threading.Event(), threading.Event()
    get_item = DynamoDBBackend.get_item

    def waiting_get_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() in transaction_thread:
            inside.set()
            written.wait(WAIT_S)  # the other write lands now, unless a lock holds it back
        return get_item(self, *args, **kwargs)

    monkeypatch.setattr(DynamoDBBackend, "get_item", waiting_get_item)

    def transaction() -> None:
        transaction_thread.append(threading.get_ident())
        with pytest.raises(ddb.exceptions.TransactionCanceledException):
            ddb.transact_write_items(
                TransactItems=[
                    {
                        "ConditionCheck": {
                            "TableName": TABLE,
                            "Key": {"pk": {"S": "job"}, "sk": {"S": "done"}},
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    }
                ]
            )

    def write() -> None:
        other.put_item(TableName=TABLE, Item={"pk": {"S": "job"}, "sk": {"S": "step#1"}})
        written.set()

    first = _in_a_thread(transaction)
    assert inside.wait(30)
    second = _in_a_thread(write)
    first.join(30)
    second.join(30)
    return ddb.scan(TableName=TABLE)["Items"]


def test_a_write_made_during_a_cancelled_transaction_is_lost_as_moto_is(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = _write_during_a_cancelled_transaction(monkeypatch)
    assert {i["sk"]["S"] for i in items} == {"done"}  # the table's snapshot put back over the write


def test_the_request_lock_keeps_a_write_made_during_a_cancelled_transaction(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    dynamodb_request_lock.serialize_dynamodb()
    try:
        items = _write_during_a_cancelled_transaction(monkeypatch)
    finally:
        dynamodb_request_lock.unserialize_dynamodb()
    assert {i["sk"]["S"] for i in items} == {"done", "step#1"}  # the write ran after the transaction


def _two_receivers_at_once(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Two threads receive from a queue of one message; the first is held just before marking it."""
    from moto.sqs.models import Message

    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="notifications")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="step 1")
    marking: list[int] = []
    second_marking = threading.Event()
    mark_received = Message.mark_received

    def held_mark_received(self: Any, *args: Any, **kwargs: Any) -> Any:
        marking.append(threading.get_ident())
        if len(marking) == 1:
            second_marking.wait(WAIT_S)  # the other receiver sees the message still visible now
        else:
            second_marking.set()
        return mark_received(self, *args, **kwargs)

    monkeypatch.setattr(Message, "mark_received", held_mark_received)
    got: list[list[str]] = [[], []]

    def receive(slot: int) -> Callable[[], None]:
        client = boto3.client("sqs", region_name="us-east-1")

        def run() -> None:
            messages = client.receive_message(QueueUrl=url, VisibilityTimeout=30).get("Messages", [])
            got[slot] = [m["Body"] for m in messages]

        return run

    first = _in_a_thread(receive(0))
    for _ in range(300):  # until the first receiver is inside moto's pass
        if marking:
            break
        second_marking.wait(0.01)
    second = _in_a_thread(receive(1))
    first.join(30)
    second.join(30)
    return got


def test_two_receivers_both_get_one_message_as_moto_is(aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _two_receivers_at_once(monkeypatch) == [["step 1"], ["step 1"]]


def test_one_receiver_at_a_time_hands_a_message_to_one_receiver(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    sqs_one_receiver.patch_receive()
    try:
        got = _two_receivers_at_once(monkeypatch)
    finally:
        sqs_one_receiver.unpatch_receive()
    assert sorted(got) == [[], ["step 1"]]


class _SignallingLock:
    """The S3 request lock, saying when a request waits for it (so the held one can go on at once)."""

    def __init__(self, waiting: threading.Event) -> None:
        self.lock = threading.RLock()
        self.waiting = waiting

    def __enter__(self) -> None:
        if not self.lock.acquire(blocking=False):
            self.waiting.set()
            self.lock.acquire()

    def __exit__(self, *_: object) -> None:
        self.lock.release()


def _two_puts_of_one_key(monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], bytes]:
    """Two threads PUT one key; the first is held after moto stored its object, before its reply."""
    from moto.s3.models import S3Backend

    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="runs")
    other_in = threading.Event()  # the second PUT finished (moto as it is) or waits for the lock
    monkeypatch.setattr(s3_request_lock, "LOCK", _SignallingLock(other_in))
    putting: list[int] = []
    put_object = S3Backend.put_object

    def held_put_object(self: Any, *args: Any, **kwargs: Any) -> Any:
        stored = put_object(self, *args, **kwargs)
        putting.append(threading.get_ident())
        if len(putting) == 1:
            other_in.wait(WAIT_S)
        return stored

    monkeypatch.setattr(S3Backend, "put_object", held_put_object)
    outcomes: list[Any] = [None, None]

    def put(slot: int, body: bytes) -> Callable[[], None]:
        client = boto3.client("s3", region_name="us-east-1")

        def run() -> None:
            try:
                outcomes[slot] = client.put_object(Bucket="runs", Key="job/status.json", Body=body)[
                    "ResponseMetadata"
                ]["HTTPStatusCode"]
            except Exception as exc:  # what moto's failure looks like to the caller
                outcomes[slot] = exc
            if slot == 1:
                other_in.set()

        return run

    first = _in_a_thread(put(0, b"first"))
    for _ in range(300):  # until the first PUT is held inside moto
        if putting:
            break
        other_in.wait(0.01)
    second = _in_a_thread(put(1, b"second"))
    first.join(30)
    second.join(30)
    return outcomes, s3.get_object(Bucket="runs", Key="job/status.json")["Body"].read()


def test_a_put_whose_object_is_overwritten_before_its_reply_fails_as_moto_is(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes, stored = _two_puts_of_one_key(monkeypatch)
    assert isinstance(outcomes[0], ValueError)
    assert "closed file" in str(outcomes[0])
    assert outcomes[1] == 200
    assert stored == b"second"


def test_the_s3_request_lock_answers_both_puts_of_one_key(aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    s3_request_lock.serialize_s3()
    try:
        outcomes, stored = _two_puts_of_one_key(monkeypatch)
    finally:
        s3_request_lock.unserialize_s3()
    assert outcomes == [200, 200]
    assert stored == b"second"  # the second PUT ran after the first, as it arrived

"""The local mode's queue source: every message handled once, in order, deleted; few requests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from tornasole.aws.clients import clear_client_cache, client
from tornasole.local.moto_patches import sqs_one_receiver
from tornasole.local.queue_source import QueueSource


@pytest.fixture
def queue() -> Iterator[str]:
    """A queue in moto as the local mode runs it (``sqs_one_receiver``)."""
    sqs_one_receiver.patch_receive()
    try:
        with mock_aws():
            clear_client_cache()
            yield client("sqs").create_queue(QueueName="notifications")["QueueUrl"]
    finally:
        sqs_one_receiver.unpatch_receive()
        clear_client_cache()


def _send(url: str, n: int) -> None:
    for i in range(n):
        client("sqs").send_message(QueueUrl=url, MessageBody=json.dumps({"n": i}))


def _counting_requests() -> list[str]:
    made: list[str] = []
    client("sqs").meta.events.register("before-call.sqs", lambda model, **_: made.append(model.name))
    return made


def test_each_message_is_handled_once_in_order_and_deleted_in_batches(queue: str) -> None:
    _send(queue, 23)
    handled: list[int] = []
    errors: list[str] = []
    source = QueueSource("q", queue, lambda body: handled.append(body["n"]), threading.Event(), errors.append)
    made = _counting_requests()
    while source.poll_once():
        pass
    assert handled == list(range(23))
    assert errors == []
    assert made.count("ReceiveMessage") <= 4  # 10 + 10 + 3, and the empty one that ends the loop
    assert made.count("DeleteMessageBatch") == 3
    assert not source.pending()  # nothing left in the queue, visible or not


def test_a_failing_message_is_reported_and_the_others_handled(queue: str) -> None:
    _send(queue, 3)
    handled: list[int] = []
    errors: list[str] = []

    def handle(body: dict[str, Any]) -> None:
        if body["n"] == 1:
            raise SystemExit(3)  # a rule's sys.exit(): the worker carries on
        handled.append(body["n"])

    source = QueueSource("q", queue, handle, threading.Event(), errors.append)
    while source.poll_once():
        pass
    assert handled == [0, 2]
    assert len(errors) == 1
    assert "SystemExit" in errors[0]
    assert not source.pending()


def test_a_message_held_too_long_is_left_to_the_queue(queue: str) -> None:
    _send(queue, 2)
    handled: list[int] = []
    source = QueueSource(
        "q", queue, lambda body: handled.append(body["n"]), threading.Event(), print, hold_seconds=0
    )
    assert source.poll_once() == 0  # both received, both past the hold: neither handled nor deleted
    assert handled == []
    assert source.pending()  # still in flight in SQS: handed out again after the visibility timeout


def test_workers_share_the_buffer(queue: str) -> None:
    _send(queue, 40)
    handled: list[int] = []
    lock = threading.Lock()

    def handle(body: dict[str, Any]) -> None:
        with lock:
            handled.append(body["n"])

    stop = threading.Event()
    source = QueueSource("q", queue, handle, stop, print, workers=3)
    source.start()
    try:
        for _ in range(200):
            if len(handled) == 40 and source.is_idle():
                break
            stop.wait(0.05)
    finally:
        stop.set()
        source.join(5)
    assert sorted(handled) == list(range(40))  # each once: no two receivers got the same message
    assert source.is_idle()

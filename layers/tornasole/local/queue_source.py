"""An SQS queue as an event source of the local mode (S3 notifications, the bus's and topic's targets)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from tornasole.aws.clients import client
from tornasole.local.sources import Source

__all__ = ["QueueSource"]

log = logging.getLogger(__name__)


class QueueSource(Source):
    """An SQS queue and what to do with each message body (parsed JSON), one message at a time.

    Each worker hands one message to ``handle`` at a time, but messages are received up to
    ``batch`` per request into a buffer the workers share, and handled ones are deleted together
    (when the buffer runs dry, or ten at a time): a ReceiveMessage and a DeleteMessageBatch per
    message cost more than the S3 notification's invocation itself. A message left in the buffer
    longer than ``hold_seconds`` (the workers were busy) is not handled from it: the queue hands it
    out again once its visibility timeout (30 s) has passed, as SQS would.
    """

    def __init__(
        self,
        name: str,
        url: str,
        handle: Callable[[dict[str, Any]], None],
        stop: threading.Event,
        on_error: Callable[[str], None],
        workers: int = 1,
        batch: int = 10,
        wait_seconds: int = 1,
        hold_seconds: float = 20.0,
    ) -> None:
        super().__init__(name, stop, on_error, workers)
        self.url = url
        self.handle = handle
        self.batch = batch
        self.wait_seconds = wait_seconds
        self.hold_seconds = hold_seconds
        self._buffer: deque[tuple[float, dict[str, Any]]] = deque()  # (received at, message)
        self._handled: list[str] = []  # receipt handles to delete
        self._buffer_lock = threading.Lock()

    def poll_once(self) -> int:
        message = self._take()
        if message is None:
            received = (
                client("sqs")
                .receive_message(
                    QueueUrl=self.url, MaxNumberOfMessages=self.batch, WaitTimeSeconds=self.wait_seconds
                )
                .get("Messages", [])
            )
            now = time.monotonic()
            with self._buffer_lock:
                self._buffer.extend((now, m) for m in received)
            message = self._take()
            if message is None:
                return 0
        with self.working():
            try:
                self.handle(json.loads(message["Body"]))
            except BaseException as exc:  # one bad message never blocks the queue
                self.on_error(f"{self.name}: {type(exc).__name__}: {exc}")
            # Handled, or failed after its retries (Lambda would send it to the DLQ): either way done.
            with self._buffer_lock:
                self._handled.append(message["ReceiptHandle"])
                done: list[str] = []
                if not self._buffer or len(self._handled) >= 10:  # SQS's limit per DeleteMessageBatch
                    done, self._handled = self._handled, []
            if done:
                self._delete(done)
        return 1

    def _take(self) -> dict[str, Any] | None:
        """The oldest buffered message still safely within its visibility timeout (None: none left)."""
        with self._buffer_lock:
            while self._buffer:
                received_at, message = self._buffer.popleft()
                if time.monotonic() - received_at <= self.hold_seconds:
                    return message
                log.info("%s: message held too long in the buffer, left for SQS to hand out again", self.name)
        return None

    def _delete(self, receipts: list[str]) -> None:
        entries = [{"Id": str(i), "ReceiptHandle": r} for i, r in enumerate(receipts)]
        failed = client("sqs").delete_message_batch(QueueUrl=self.url, Entries=entries).get("Failed", [])
        if failed:
            self.on_error(f"{self.name}: {len(failed)} handled messages not deleted: {failed[0]}")

    def pending(self) -> bool:
        attrs = client("sqs").get_queue_attributes(
            QueueUrl=self.url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return any(int(v) for v in attrs.values())

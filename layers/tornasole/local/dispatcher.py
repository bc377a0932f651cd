"""Hand moto's queued payloads to the deployed handler functions, as Lambda would.

One thread, one invocation at a time (like a function with reserved
concurrency 1): S3 notifications from the notification queue go to
``on_object_created``, new DynamoDB stream records to ``publish_events``,
a timer to ``scheduled_check``; events and alerts that reach their SQS
queues are handed to subscribers (the CLI prints them). The payloads are
the ones moto generated, i.e. what Lambda would receive.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tornasole.aws.clients import client
from tornasole.lambda_support.handlers import load_handler
from tornasole.local.resources import LocalResources
from tornasole.stack_spec import DEFAULT_SPEC, FunctionSpec, StackSpec

__all__ = ["Dispatcher", "LocalLambdaContext"]

log = logging.getLogger(__name__)
Subscriber = Callable[[dict[str, Any]], None]
MAX_ATTEMPTS = 3  # Lambda's async invocation: 1 try + 2 retries


@dataclass(frozen=True)
class LocalLambdaContext:
    """The attributes Powertools reads from a Lambda context."""

    function_name: str
    memory_limit_in_mb: int = 1024
    aws_request_id: str = "local"
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:000000000000:function:local"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


class Dispatcher:
    """Polls the local queues and the table's stream; invokes handlers; notifies subscribers."""

    def __init__(
        self,
        resources: LocalResources,
        spec: StackSpec = DEFAULT_SPEC,
        schedule_seconds: float = 60.0,
        poll_seconds: float = 0.1,
    ) -> None:
        self.resources = resources
        self.spec = spec
        self.schedule_seconds = schedule_seconds
        self.poll_seconds = poll_seconds
        self.on_object_created = load_handler(spec.on_object_created.asset_dir)
        self.publish_events = load_handler(spec.publish_events.asset_dir)
        self.scheduled_check = load_handler(spec.scheduled_check.asset_dir)
        self.event_subscribers: list[Subscriber] = []
        self.alert_subscribers: list[Subscriber] = []
        self.errors: list[str] = []
        self._shard_iterators: dict[str, str | None] = {}
        self._last_schedule = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- one pass over every source ------------------------------------------------------------------
    def pump(self) -> int:
        """Process what is waiting right now; returns how many payloads were handled."""
        with self._lock:
            n = self._drain_notifications()
            n += self._drain_stream()
            if time.monotonic() - self._last_schedule >= self.schedule_seconds:
                self.run_scheduled_check()
                n += 1
            n += self._drain_queue(self.resources.events_queue_url, self.event_subscribers, json.loads)
            n += self._drain_queue(self.resources.alerts_queue_url, self.alert_subscribers, json.loads)
            return n

    def drain(self, timeout: float = 30.0) -> None:
        """Pump until nothing is left (two idle passes in a row) or ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        idle = 0
        while idle < 2 and time.monotonic() < deadline:
            idle = idle + 1 if self.pump() == 0 else 0

    def run_scheduled_check(self) -> None:
        self._last_schedule = time.monotonic()
        event = {
            "version": "0",
            "id": f"local-schedule-{int(time.time())}",
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": "000000000000",
            "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": "us-east-1",
            "resources": [],
            "detail": {},
        }
        self._invoke(self.scheduled_check, event, self.spec.scheduled_check)

    # -- background thread -------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tornasole-local-dispatcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.pump() == 0:
                    self._stop.wait(self.poll_seconds)
            except Exception as exc:  # keep the local stack alive; the error is shown to the user
                self._record_error(f"dispatcher: {exc!r}")
                self._stop.wait(1.0)

    # -- sources -------------------------------------------------------------------------------------
    def _drain_notifications(self) -> int:
        sqs = client("sqs")
        url = self.resources.notification_queue_url
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        for msg in messages:
            body = json.loads(msg["Body"])
            if body.get("Event") != "s3:TestEvent":
                self._invoke(self.on_object_created, body, self.spec.on_object_created)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
        return len(messages)

    def _drain_stream(self) -> int:
        streams = client("dynamodbstreams")
        if not self._shard_iterators:
            desc = streams.describe_stream(StreamArn=self.resources.stream_arn)["StreamDescription"]
            for shard in desc["Shards"]:
                it = streams.get_shard_iterator(
                    StreamArn=self.resources.stream_arn,
                    ShardId=shard["ShardId"],
                    ShardIteratorType="TRIM_HORIZON",
                )["ShardIterator"]
                self._shard_iterators[shard["ShardId"]] = it
        handled = 0
        for shard_id, iterator in list(self._shard_iterators.items()):
            if iterator is None:
                continue
            out = streams.get_records(ShardIterator=iterator)
            self._shard_iterators[shard_id] = out.get("NextShardIterator")
            records = out.get("Records", [])
            if records:
                for r in records:
                    r.setdefault("eventSourceARN", self.resources.stream_arn)
                    r["dynamodb"].pop("ApproximateCreationDateTime", None)
                self._invoke(self.publish_events, {"Records": records}, self.spec.publish_events)
                handled += len(records)
        return handled

    def _drain_queue(self, url: str, subscribers: list[Subscriber], parse: Callable[[str], Any]) -> int:
        sqs = client("sqs")
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        for msg in messages:
            payload = parse(msg["Body"])
            for subscriber in subscribers:
                try:
                    subscriber(payload)
                except Exception as exc:
                    self._record_error(f"subscriber {subscriber!r}: {exc!r}")
            sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
        return len(messages)

    def _invoke(
        self, handler: Callable[[dict[str, Any], Any], Any], event: dict[str, Any], fn: FunctionSpec
    ) -> None:
        context = LocalLambdaContext(function_name=fn.id, memory_limit_in_mb=fn.memory_mb)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                handler(event, context)
                return
            except Exception as exc:
                if attempt == MAX_ATTEMPTS:
                    self._record_error(f"{fn.id} failed {MAX_ATTEMPTS} times: {exc!r}")
                else:
                    log.warning("%s failed (attempt %d), retrying: %r", fn.id, attempt, exc)

    def _record_error(self, message: str) -> None:
        log.error(message)
        self.errors.append(message)

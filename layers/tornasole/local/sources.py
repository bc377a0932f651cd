"""Event sources of the local mode, each on its own thread(s), as Lambda's event source mappings are.

- ``QueueSource`` (``tornasole.local.queue_source``): long-polls an SQS queue
  (moto wakes a waiting receive as soon as a message arrives) and hands each
  message to a callback, one at a time per worker; several workers give a
  function its own concurrency.
- ``StreamSource``: reads the state table's DynamoDB stream in sequence order
  and hands each batch to ``publish_events``; one reader per table, so events
  reach the bus in the order their changes were committed. The stack's event
  filter (outbox inserts) is applied as the event source mapping applies it;
  the local mode reads the shard in-process (``moto_patches.read_stream``).
  Failed records (``batchItemFailures``) are retried from the first failure,
  as Lambda does.
- ``ScheduleSource``: the EventBridge schedule, a timer.

Every source reports whether it is idle, which is what ``Dispatcher.drain``
waits for.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from tornasole.aws.clients import client
from tornasole.local.filters import compile_pattern
from tornasole.local.invoker import FunctionInvoker

__all__ = ["ScheduleSource", "Source", "StreamSource", "schedule_event"]

log = logging.getLogger(__name__)
IN_PROCESS = "in-process"  # the position key of a stream read by ``StreamSource.reader``


class Source:
    """Worker threads polling one source; ``poll_once`` returns how many items it handled."""

    def __init__(self, name: str, stop: threading.Event, on_error: Callable[[str], None], workers: int = 1):
        self.name = name
        self.stop_event = stop
        self.on_error = on_error
        self.workers = workers
        self.polls = 0
        self._busy = 0
        self._state = threading.Lock()
        self._threads: list[threading.Thread] = []

    def poll_once(self) -> int:
        raise NotImplementedError

    def idle_wait(self) -> None:
        """What a worker does after an empty poll (long-polling sources already waited)."""

    def pending(self) -> bool:
        """Whether the source itself still holds work (e.g. messages in its queue)."""
        return False

    def is_idle(self) -> bool:
        """Nothing being handled now and nothing waiting in the source."""
        with self._state:
            busy = self._busy
        return busy == 0 and not self.pending()

    @contextmanager
    def working(self) -> Iterator[None]:
        """Marks the source busy while items it received are handled (``drain`` waits for them)."""
        with self._state:
            self._busy += 1
        try:
            yield
        finally:
            with self._state:
                self._busy -= 1

    def start(self) -> None:
        for i in range(self.workers):
            t = threading.Thread(target=self._run, name=f"tornasole-local-{self.name}-{i}", daemon=True)
            self._threads.append(t)
            t.start()

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def _run(self) -> None:
        while not self.stop_event.is_set():
            handled = 0
            try:
                handled = self.poll_once()
            except BaseException as exc:  # a worker thread never dies; the error is shown
                self.on_error(f"{self.name}: {type(exc).__name__}: {exc}")
                self.stop_event.wait(1.0)
            finally:
                with self._state:
                    self.polls += 1
            if handled == 0:
                self.idle_wait()


class StreamSource(Source):
    """The table's stream -> ``publish_events``, in order, one batch at a time."""

    def __init__(
        self,
        stream_arn: str,
        invoke: FunctionInvoker,
        stop: threading.Event,
        on_error: Callable[[str], None],
        batch_size: int = 100,
        retry_attempts: int = 10,
        poll_seconds: float = 0.05,
        consumed: Callable[[int | None], None] | None = None,
        filter_pattern: str | None = None,
        reader: Callable[[str | None, int], list[dict[str, Any]]] | None = None,
    ) -> None:
        super().__init__("stream", stop, on_error, workers=1)
        self.consumed = consumed  # told the last sequence number handed over after each poll
        # The event source mapping's filter: records it rejects never reach the function (as on AWS).
        self.wanted = compile_pattern(filter_pattern) if filter_pattern else None
        # Reads the records after a sequence number in-process (the local mode's moto), instead of
        # GetShardIterator + GetRecords: ``tornasole.local.moto_patches.read_stream``.
        self.reader = reader
        self.stream_arn = stream_arn
        self.invoke = invoke
        self.batch_size = batch_size
        self.retry_attempts = retry_attempts
        self.poll_seconds = poll_seconds
        self.positions: dict[str, str | None] = {}  # shard -> last sequence number handed over

    def idle_wait(self) -> None:
        self.stop_event.wait(self.poll_seconds)

    def _iterator(self, shard_id: str) -> str:
        # A fresh iterator on every poll, from the last sequence number handled: moto replaces a table's
        # stream shard object when it rolls back a failed transaction, and an iterator chained through
        # NextShardIterator keeps reading the discarded shard (the stream would go silent).
        streams = client("dynamodbstreams")
        last = self.positions.get(shard_id)
        kwargs = (
            {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": last}
            if last
            else {"ShardIteratorType": "TRIM_HORIZON"}
        )
        return streams.get_shard_iterator(StreamArn=self.stream_arn, ShardId=shard_id, **kwargs)[
            "ShardIterator"
        ]

    def poll_once(self) -> int:
        with self.working():
            handled = self._poll_shards()
        if self.consumed is not None:
            last = [int(p) for p in self.positions.values() if p]
            self.consumed(max(last) if handled and last else None)
        return handled

    def _poll_shards(self) -> int:
        if self.reader is not None:
            return self._poll_reader()
        streams = client("dynamodbstreams")
        if not self.positions:
            shards = streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]["Shards"]
            self.positions = {s["ShardId"]: None for s in shards}
        handled = 0
        for shard_id in list(self.positions):
            records = streams.get_records(ShardIterator=self._iterator(shard_id), Limit=self.batch_size)[
                "Records"
            ]
            if records:
                self._deliver(records)
                self.positions[shard_id] = records[-1]["dynamodb"]["SequenceNumber"]
                handled += len(records)
        return handled

    def _poll_reader(self) -> int:
        assert self.reader is not None
        records = self.reader(self.positions.get(IN_PROCESS), self.batch_size)
        if records:
            self._deliver(records)
            self.positions[IN_PROCESS] = records[-1]["dynamodb"]["SequenceNumber"]
        return len(records)

    def _deliver(self, records: list[dict[str, Any]]) -> None:
        if self.wanted is not None:
            records = [r for r in records if self.wanted(r)]
            if not records:
                return
        records = copy.deepcopy(records)  # the function's own event (a reader may share its records)
        for r in records:
            r.setdefault("eventSourceARN", self.stream_arn)
            r["dynamodb"].pop("ApproximateCreationDateTime", None)  # a datetime from boto3; not JSON
        remaining = records
        for _ in range(self.retry_attempts + 1):
            outcome = self.invoke({"Records": remaining})
            failures = (outcome.result or {}).get("batchItemFailures", []) if outcome.ok else None
            if failures == []:
                return
            if failures:  # retry from the first failed record on, in order (ReportBatchItemFailures)
                first = min(int(f["itemIdentifier"]) for f in failures)
                remaining = [r for r in remaining if int(r["dynamodb"]["SequenceNumber"]) >= first]
            if self.stop_event.wait(0.2):
                return
        self.on_error(f"stream: {len(remaining)} records dropped after {self.retry_attempts} retries")


def schedule_event() -> dict[str, Any]:
    """The payload EventBridge Scheduler sends to a function."""
    now = datetime.now(UTC)
    return {
        "version": "0",
        "id": f"local-schedule-{int(now.timestamp())}",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "000000000000",
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "us-east-1",
        "resources": [],
        "detail": {},
    }


class ScheduleSource(Source):
    """Invoke ``scheduled_check`` every ``period`` seconds (and on demand, never two at once)."""

    def __init__(
        self, invoke: FunctionInvoker, period: float, stop: threading.Event, on_error: Callable[[str], None]
    ) -> None:
        super().__init__("schedule", stop, on_error, workers=1)
        self.invoke = invoke
        self.period = period
        self._run_lock = threading.Lock()

    def run_now(self) -> None:
        with self.working(), self._run_lock:
            self.invoke(schedule_event())

    def poll_once(self) -> int:
        if self.stop_event.wait(self.period):
            return 0
        self.run_now()
        return 0

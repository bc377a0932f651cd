"""Hand moto's payloads to the stack's handlers, each function on its own workers, as Lambda would.

Lambda gives every function its own concurrency, so in the local mode each
function gets its own thread(s) (``tornasole.local.sources``):

- S3 notifications (moto queues them on SQS) -> ``on_object_created``,
  ``evaluation_workers`` threads;
- the state table's DynamoDB stream -> ``publish_events``, one reader in
  commit order, so events are never stuck behind a backlog of evaluations
  and reach the bus in the order their changes were committed;
- a timer -> ``scheduled_check``;
- SageMaker's training-job state changes on the default bus -> ``sagemaker_state_change``;
- the events and alerts that reach their SQS targets -> the subscribers
  (the CLI prints them), one thread each, in arrival order;
- ``Tornasole Alert`` events (webhook/slack/teams actions) -> ``alert_sender``, which POSTs them to
  the operator's destinations on a thread of its own (``tornasole.local.alert_sender``).

The handlers are the package's (``tornasole.lambda_support.handlers``), the
same code the CDK stack deploys. A handler that raises, even ``SystemExit``,
is a failed invocation: retried, then reported in ``errors``; no thread dies.
The evaluating handlers run custom rules in a child process per run
(``rule_child``), as the deployed stack runs them in its sandbox function: a
rule that swallows its stop or calls ``os._exit`` costs its own verdict only.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from tornasole.lambda_support.handlers import handler_module, load_handler
from tornasole.local.invoker import FunctionInvoker, LocalLambdaContext
from tornasole.local.queue_source import QueueSource
from tornasole.local.resources import LocalResources
from tornasole.local.sources import ScheduleSource, Source, StreamSource
from tornasole.stack_spec import DEFAULT_SPEC, StackSpec

__all__ = ["Dispatcher", "LocalLambdaContext"]

log = logging.getLogger(__name__)
Subscriber = Callable[[dict[str, Any]], None]


def _drop_disabled_metrics() -> None:
    """With metrics disabled Powertools neither prints nor clears them: they would pile up for ever."""
    if os.environ.get("POWERTOOLS_METRICS_DISABLED", "").lower() == "true":
        from tornasole.lambda_support.observability import metrics

        metrics.clear_metrics()


def _custom_rules_forked(fn: Any, handler: Callable[[dict[str, Any], Any], Any]) -> Any:
    """``handler``, its evaluator (if it has one) running custom rules in a child per run, where this
    platform forks and no sandbox function is configured; built at the first invocation, as Lambda's is."""
    build = getattr(handler_module(fn.asset_dir), "evaluator", None)
    if build is None or not hasattr(os, "fork"):
        return handler

    def invoke(event: dict[str, Any], context: Any) -> Any:
        runner = build().runner
        if runner.custom_rules is None:
            from tornasole.local.rule_child import ForkedCustomRuleRunner

            runner.custom_rules = ForkedCustomRuleRunner(runner)
        return handler(event, context)

    return invoke


class Dispatcher:
    """The event source mappings of the local stack; ``start()``/``stop()``, ``drain()`` to wait."""

    def __init__(
        self,
        resources: LocalResources,
        spec: StackSpec = DEFAULT_SPEC,
        schedule_seconds: float = 60.0,
        evaluation_workers: int = 2,
        stream_poll_seconds: float = 0.05,
        stream_consumed: Callable[[int | None], None] | None = None,
        stream_reader: Callable[[str | None, int], list[dict[str, Any]]] | None = None,
        alert_sender: Subscriber | None = None,
    ) -> None:
        self.resources = resources
        self.spec = spec
        self.event_subscribers: list[Subscriber] = []
        self.alert_subscribers: list[Subscriber] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._errors_lock = threading.Lock()
        invoker = self._invoker
        self.on_object_created = invoker(spec.on_object_created)
        self.publish_events = invoker(spec.publish_events)
        self.scheduled_check = invoker(spec.scheduled_check)
        self.sagemaker_state_change = invoker(spec.sagemaker_state_change)
        self.notifications = QueueSource(
            "notifications",
            resources.notification_queue_url,
            self._on_notification,
            self._stop,
            self._record_error,
            workers=evaluation_workers,  # one invocation per object, as S3 -> Lambda makes
        )
        self.stream = StreamSource(
            resources.stream_arn,
            self.publish_events,
            self._stop,
            self._record_error,
            batch_size=spec.stream_batch_size,
            retry_attempts=spec.stream_retry_attempts,
            poll_seconds=stream_poll_seconds,
            consumed=stream_consumed,
            filter_pattern=spec.stream_filter_pattern,
            reader=stream_reader,
        )
        self.schedule = ScheduleSource(self.scheduled_check, schedule_seconds, self._stop, self._record_error)
        self.events = QueueSource(
            "events",
            resources.events_queue_url,
            self._notify(self.event_subscribers),
            self._stop,
            self._record_error,
        )
        self.alerts = QueueSource(
            "alerts",
            resources.alerts_queue_url,
            self._notify(self.alert_subscribers),
            self._stop,
            self._record_error,
        )
        self.sagemaker_events = (
            QueueSource(
                "sagemaker-events",
                resources.sagemaker_events_queue_url,
                self.sagemaker_state_change,
                self._stop,
                self._record_error,
            )
            if resources.sagemaker_events_queue_url
            else None
        )

        self.alert_destinations = (
            QueueSource(
                "alert-destinations",
                resources.alert_destinations_queue_url,
                alert_sender,
                self._stop,
                self._record_error,
            )
            if resources.alert_destinations_queue_url and alert_sender is not None
            else None
        )

    @property
    def sources(self) -> tuple[Source, ...]:
        base = (self.notifications, self.stream, self.schedule, self.events, self.alerts)
        optional = (self.sagemaker_events, self.alert_destinations)
        return base + tuple(s for s in optional if s is not None)

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> None:
        for source in self.sources:
            source.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout
        for source in self.sources:
            source.join(max(0.0, deadline - time.monotonic()))

    def run_scheduled_check(self) -> None:
        """Run the scheduled check now (never concurrently with the timer's)."""
        self.schedule.run_now()

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every source is idle twice in a row, the stream polled in between; False on timeout."""
        deadline = time.monotonic() + timeout
        quiet = 0
        while time.monotonic() < deadline and quiet < 2:
            polls = self.stream.polls
            time.sleep(0.05)
            while self.stream.polls == polls and time.monotonic() < deadline and not self._stop.is_set():
                time.sleep(0.01)
            quiet = quiet + 1 if all(s.is_idle() for s in self.sources) else 0
        return quiet >= 2

    # -- plumbing ------------------------------------------------------------------------------------
    def _invoker(self, fn: Any) -> FunctionInvoker:
        handler = _custom_rules_forked(fn, load_handler(fn))
        return FunctionInvoker(fn, handler, self._record_error, stop=self._stop, after=_drop_disabled_metrics)

    def _on_notification(self, body: dict[str, Any]) -> None:
        if body.get("Event") != "s3:TestEvent":  # what S3 sends when the notification is configured
            self.on_object_created(body)

    def _notify(self, subscribers: list[Subscriber]) -> Callable[[dict[str, Any]], None]:
        def notify(payload: dict[str, Any]) -> None:
            for subscriber in list(subscribers):
                try:
                    subscriber(payload)
                except Exception as exc:
                    self._record_error(f"subscriber {subscriber!r}: {exc!r}")

        return notify

    def _record_error(self, message: str) -> None:
        log.error(message)
        with self._errors_lock:
            self.errors.append(message)

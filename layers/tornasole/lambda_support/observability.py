"""Powertools Logger / Metrics / Tracer shared by the evaluator's handlers.

The library below logs with ``logging.getLogger(__name__)`` and structured
``extra`` keys (``job``, ``rule``, ``step``); ``copy_config_to_registered_loggers``
routes those records through the Powertools JSON formatter, so one CloudWatch
Logs filter (``{ ($.job = "my-job") && ($.rule = "VanishingGradient") }``, see
``tornasole.jobs.logs``) shows one rule's evaluation log for one job. Creating
these objects makes no AWS call.

Metrics are locked. Lambda runs one invocation at a time per process, but the
local mode (and the reliability suite) run several function instances as
threads of one process, and Powertools keeps one metric set per process: one
thread's flush iterating it while another added a metric raised
``RuntimeError: dictionary changed size during iteration``. So adding, flushing
and clearing hold one lock (uncontended in Lambda).

The invocation's Lambda context keys (``function_request_id`` and the rest) are
per thread for the same reason: ``Logger.inject_lambda_context`` sets them on
the formatter, once per process, so a thread's log lines carried the request id
of whichever invocation had started last. :func:`inject_invocation_context`
puts them in Powertools' thread-local keys instead (one thread, one invocation,
as in Lambda).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging import utils as logging_utils
from aws_lambda_powertools.logging.lambda_context import build_lambda_context_model
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

from tornasole.stack_spec import DEFAULT_SPEC

__all__ = ["LockedEMFProvider", "inject_invocation_context", "logger", "metrics", "tracer"]

_SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or DEFAULT_SPEC.service_name


class LockedEMFProvider(AmazonCloudWatchEMFProvider):
    """Powertools' EMF metrics with adding, flushing and clearing under one process-wide lock."""

    _lock = threading.RLock()

    def add_metric(self, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            super().add_metric(*args, **kwargs)

    def flush_metrics(self, raise_on_empty_metrics: bool = False) -> None:
        with self._lock:
            super().flush_metrics(raise_on_empty_metrics=raise_on_empty_metrics)

    def clear_metrics(self) -> None:
        with self._lock:
            super().clear_metrics()


def _metrics(namespace: str) -> Metrics:
    """``Metrics(namespace=...)`` as Powertools builds it, on the locked provider (same shared sets)."""
    provider = LockedEMFProvider(
        metric_set=Metrics._metrics,
        dimension_set=Metrics._dimensions,
        namespace=namespace,
        metadata_set=Metrics._metadata,
        default_dimensions=Metrics._default_dimensions,
    )
    return Metrics(namespace=namespace, provider=provider)


logger = Logger(service=_SERVICE)
metrics = _metrics(os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or DEFAULT_SPEC.metrics_namespace)
tracer = Tracer(service=_SERVICE)

# The library's parent logger gets Powertools' handler; every ``tornasole.*`` logger (also those created
# later, e.g. ``tornasole.rules.<Rule>``) propagates to it, so its records are JSON with their extra keys.
logging.getLogger("tornasole")
logging_utils.copy_config_to_registered_loggers(source_logger=logger, include={"tornasole"})


_Handler = TypeVar("_Handler", bound=Callable[..., Any])
_cold = [True]  # the first invocation of this process (one flag, taken under the lock)
_cold_lock = threading.Lock()


def _cold_start() -> bool:
    with _cold_lock:
        cold, _cold[0] = _cold[0], False
    return cold


def inject_invocation_context(handler: _Handler) -> _Handler:
    """``logger.inject_lambda_context(clear_state=True)`` with the context keys kept per thread.

    Every log line of the invocation, the library's ``tornasole.*`` loggers
    included, carries ``cold_start`` and the Lambda context's fields
    (``function_name``, ``function_request_id``, ...) of the invocation running
    on its own thread; the keys are cleared when the handler returns or raises.
    """

    @functools.wraps(handler)
    def invoke(event: Any, context: Any, *args: Any, **kwargs: Any) -> Any:
        fields = build_lambda_context_model(context).__dict__
        logger.thread_safe_clear_keys()
        logger.thread_safe_append_keys(cold_start=_cold_start(), **fields)
        try:
            return handler(event, context, *args, **kwargs)
        finally:
            logger.thread_safe_clear_keys()

    return invoke  # type: ignore[return-value]

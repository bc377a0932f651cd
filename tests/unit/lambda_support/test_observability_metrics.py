"""The handlers' metrics under concurrent invocations in one process (the local mode's threads)."""

from __future__ import annotations

import json
import sys
import threading
import warnings

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from tornasole.lambda_support.observability import LockedEMFProvider, metrics

THREADS, ROUNDS = 8, 300


def _hammer(target: Metrics) -> list[BaseException]:
    """THREADS threads each adding a metric and flushing, ROUNDS times; the exceptions they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def invocation() -> None:
        start.wait()
        for _ in range(ROUNDS):
            try:
                target.add_metric(name="StepsEvaluated", unit=MetricUnit.Count, value=1)
                target.flush_metrics()
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                errors.append(exc)

    threads = [threading.Thread(target=invocation) for _ in range(THREADS)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as CPython allows: races show at once
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a flush that finds the set already flushed warns it is empty
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(interval)
    return errors


def test_concurrent_invocations_flush_every_metric_once_and_never_raise(monkeypatch, capsys) -> None:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    assert isinstance(metrics.provider, LockedEMFProvider)
    metrics.clear_metrics()
    assert _hammer(metrics) == []
    total = 0
    for line in capsys.readouterr().out.splitlines():
        value = json.loads(line).get("StepsEvaluated", 0)
        total += sum(value) if isinstance(value, list) else value
    # each added once, none flushed twice or lost (Powertools' own provider, hammered the same way,
    # raised "dictionary changed size during iteration" and printed some metrics twice)
    assert total == THREADS * ROUNDS

"""The reliability suite's fixture (``rig``) and its scoreboard line.

Every test here is one scenario asserting an exact end state. The session
prints one line at the end, with the counted numbers: ``reliability: S scenarios,
P passed, K hostile inputs, 0 records lost, 0 duplicate events, 0 unevaluated steps``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws
from reliability_rig import BUCKET, RULES_PREFIX, SCOREBOARD, Rig

from tornasole.local.resources import create_resources
from tornasole.stack_spec import DEFAULT_SPEC

HERE = "tests/reliability/"


@pytest.fixture
def rig(monkeypatch: pytest.MonkeyPatch, lambda_context: Any) -> Iterator[Rig]:
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    with mock_aws():
        res = create_resources(BUCKET, DEFAULT_SPEC)
        monkeypatch.setenv("TORNASOLE_STATE_TABLE", res.table)
        monkeypatch.setenv("TORNASOLE_EVENT_BUS", res.bus)
        monkeypatch.setenv("TORNASOLE_EVENT_SOURCE", DEFAULT_SPEC.bus.source)
        monkeypatch.setenv("TORNASOLE_ALERT_TOPIC_ARN", res.topic_arn)
        monkeypatch.setenv("TORNASOLE_TRIAL_BUCKET", res.bucket)
        monkeypatch.setenv("TORNASOLE_CUSTOM_RULES_PREFIX", RULES_PREFIX)
        monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
        monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")
        r = Rig(res, lambda_context)
        r.notes()
        yield r


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not report.nodeid.startswith(HERE):
        return
    if report.when == "call":
        SCOREBOARD.scenarios += 1
        SCOREBOARD.passed += int(report.passed)
    elif report.when == "setup" and not report.passed:
        SCOREBOARD.scenarios += 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if SCOREBOARD.scenarios:
        terminalreporter.write_line(SCOREBOARD.line())

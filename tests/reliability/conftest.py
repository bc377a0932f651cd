"""The reliability suite's fixture (``rig``) and its scoreboard line.

Every test here is one scenario asserting an exact end state. The session
prints one line at the end, with the counted numbers: ``reliability: S scenarios,
P passed, K hostile inputs, 0 records lost, 0 duplicate events, 0 unevaluated steps``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from reliability_rig import BUCKET, RULES_PREFIX, SCOREBOARD, Rig

from moto_stack import moto_stack
from tornasole.local.moto_patches import moto_adjusted

HERE = "tests/reliability/"


@pytest.fixture
def rig(monkeypatch: pytest.MonkeyPatch, lambda_context: Any) -> Iterator[Rig]:
    env = {"TORNASOLE_CUSTOM_RULES_PREFIX": RULES_PREFIX, "POWERTOOLS_LOG_LEVEL": "WARNING"}
    # moto as the local mode runs it: a transaction snapshots the items it names, not the whole
    # table, and a query reads one partition (at the full sizes, moto's own copies of every table
    # per transaction took 15 GB and most of the time), its expressions parsed once, and moto's
    # registry no longer keeps every item version and message moto made
    with moto_stack(monkeypatch, BUCKET, **env) as res, moto_adjusted():
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

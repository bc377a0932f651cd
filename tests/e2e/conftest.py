"""Every alert a test here produces matches the documented schema (docs/EVENTS.md "Alert body")."""

from __future__ import annotations

import pytest

from alert_checks import check_every_alert


@pytest.fixture(autouse=True)
def _alerts_match_their_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    check_every_alert(monkeypatch)

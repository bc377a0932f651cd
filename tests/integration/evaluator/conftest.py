"""Fixtures of the evaluator's integration tests; the helpers live in ``evaluator_stack``.

Test modules import helpers from ``evaluator_stack`` (a unique module name), never from
``conftest``: several test directories have a ``conftest.py``, and which one ``import conftest``
finds depends on the collection order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from evaluator_stack import BUCKET, Stack

from alert_checks import check_every_alert
from moto_stack import moto_stack


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch, lambda_context: Any) -> Iterator[Stack]:
    with moto_stack(monkeypatch, BUCKET) as res:
        s = Stack(res, lambda_context)
        s.notifications()
        yield s


@pytest.fixture(autouse=True)
def _alerts_match_their_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    check_every_alert(monkeypatch)

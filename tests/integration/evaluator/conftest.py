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
from tornasole.local.moto_patches import moto_adjusted


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch, lambda_context: Any) -> Iterator[Stack]:
    with moto_stack(monkeypatch, BUCKET) as res:
        s = Stack(res, lambda_context)
        s.notifications()
        yield s


@pytest.fixture
def moto_as_local_mode(stack: Stack) -> Iterator[None]:
    """moto as the local mode and the reliability suite run it (``tornasole.local.moto_patches``): a
    transaction snapshots only the items it names (stock moto deep-copies every table per transaction,
    so a run's cost grows with its length), a query reads one partition, expressions are parsed once.
    For the long rule runs (``pytestmark = pytest.mark.usefixtures("moto_as_local_mode")``), whose claim
    is the rules' verdicts; the delivery, ordering and failure tests keep stock moto."""
    with moto_adjusted():
        yield


@pytest.fixture(autouse=True)
def _alerts_match_their_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    check_every_alert(monkeypatch)

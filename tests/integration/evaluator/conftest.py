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
from moto import mock_aws

from tornasole.local.resources import create_resources
from tornasole.stack_spec import DEFAULT_SPEC


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch, lambda_context: Any) -> Iterator[Stack]:
    # botocore's account-id endpoints (<account>.streams.dynamodb...) are not routed by moto in-process.
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    with mock_aws():
        res = create_resources(BUCKET, DEFAULT_SPEC)
        monkeypatch.setenv("TORNASOLE_STATE_TABLE", res.table)
        monkeypatch.setenv("TORNASOLE_EVENT_BUS", res.bus)
        monkeypatch.setenv("TORNASOLE_EVENT_SOURCE", DEFAULT_SPEC.bus.source)
        monkeypatch.setenv("TORNASOLE_ALERT_TOPIC_ARN", res.topic_arn)
        monkeypatch.setenv("TORNASOLE_TRIAL_BUCKET", res.bucket)
        monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
        s = Stack(res, lambda_context)
        s.notifications()
        yield s

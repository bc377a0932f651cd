"""The moto stack and the handler files, shared by the evaluator integration tests and the reliability suite.

Why one module: both build the deployed stack's resources in moto from ``stack_spec``
and import the real ``functions/<name>/handler.py`` files by path, as Lambda does;
spelled once, the two suites cannot drift apart in how they set up what they test.
Test modules import it by its unique name (``from moto_stack import ...``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest
from moto import mock_aws

from tornasole.local.resources import LocalResources, create_resources
from tornasole.stack_spec import DEFAULT_SPEC

REPO = Path(__file__).resolve().parents[1]
_HANDLERS: dict[str, ModuleType] = {}


def load_handler_file(name: str) -> ModuleType:
    """``functions/<name>/handler.py`` imported once by path, its cached services cleared (a cold start)."""
    if name not in _HANDLERS:
        path = REPO / "functions" / name / "handler.py"
        spec = importlib.util.spec_from_file_location(f"tornasole_function_{name}", path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _HANDLERS[name] = module
    module = _HANDLERS[name]
    for attr in ("evaluator", "publisher"):
        if hasattr(module, attr):
            getattr(module, attr).cache_clear()
    return module


@contextmanager
def moto_stack(monkeypatch: pytest.MonkeyPatch, bucket: str, **env: str) -> Iterator[LocalResources]:
    """The stack's resources in an in-process moto, and the functions' environment pointing at them."""
    # botocore's account-id endpoints (<account>.streams.dynamodb...) are not routed by moto in-process.
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    with mock_aws():
        res = create_resources(bucket, DEFAULT_SPEC)
        monkeypatch.setenv("TORNASOLE_STATE_TABLE", res.table)
        monkeypatch.setenv("TORNASOLE_EVENT_BUS", res.bus)
        monkeypatch.setenv("TORNASOLE_EVENT_SOURCE", DEFAULT_SPEC.bus.source)
        monkeypatch.setenv("TORNASOLE_ALERT_TOPIC_ARN", res.topic_arn)
        monkeypatch.setenv("TORNASOLE_TRIAL_BUCKET", res.bucket)
        monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        yield res

"""Fixtures shared by every test tier.

Tiers live in sub-directories named after what they depend on: ``unit`` (pure,
no I/O beyond tmp files), ``contract`` (one suite per interface, run against
every backend), ``integration`` (moto), ``e2e`` (the local pipeline),
``infra`` (CDK), ``oracle`` (smdebug in its own venv), ``gpu`` (a CUDA device:
collected only when ``TORNASOLE_GPU_TESTS=1``, which ``make test-gpu`` sets; there
a missing device fails every test rather than skipping it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tornasole.aws.clients import clear_client_cache

# tests/gpu needs a CUDA device, which `make test` machines (and CI) do not have: it is its own tier.
collect_ignore = [] if os.environ.get("TORNASOLE_GPU_TESTS") == "1" else ["gpu"]

REPO_ROOT = Path(__file__).resolve().parent.parent
# Trees written by the real smdebug 1.0.34 and their ground truth (regenerate: `make fixtures`).
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "smdebug"

_FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "TORNASOLE_TRAINING_END_DELAY_REFRESH": "0",
}


@pytest.fixture(autouse=True)
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and region: nothing in a test can ever sign with real ones."""
    for k, v in _FAKE_ENV.items():
        monkeypatch.setenv(k, v)
    for k in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(k, raising=False)


@pytest.fixture(autouse=True)
def _clear_client_cache() -> Iterator[None]:
    clear_client_cache()
    yield
    clear_client_cache()


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """A moto server on loopback, shared by the session (state is per bucket name: use unique buckets)."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_endpoint(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point boto3's S3 (via the standard ``AWS_ENDPOINT_URL_S3``) at the moto server."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_endpoint)
    clear_client_cache()
    return moto_endpoint


@pytest.fixture
def s3_bucket(s3_endpoint: str, request: pytest.FixtureRequest) -> str:
    """A fresh, uniquely named bucket on the moto server; returns its name."""
    import re
    import uuid

    from tornasole.aws.clients import s3_client

    base = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"t-{base}-{uuid.uuid4().hex[:8]}"
    s3_client().create_bucket(Bucket=name)
    return name


@dataclass(frozen=True)
class FakeLambdaContext:
    """What Powertools reads from a Lambda context."""

    function_name: str = "tornasole-test"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:tornasole-test"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@pytest.fixture
def lambda_context() -> FakeLambdaContext:
    return FakeLambdaContext()


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    assert FIXTURES.is_dir(), f"smdebug fixtures not found at {FIXTURES} (`make fixtures` writes them)"
    return FIXTURES


@pytest.fixture
def moto_local_resources(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local mode's resources (state table ``tornasole-state``, trials bucket ``trials``) in an in-process
    moto (``mock_aws``), for tests that drive the jobs API or the CLI in this process."""
    from moto import mock_aws

    from tornasole.local.resources import create_resources

    monkeypatch.setenv("TORNASOLE_STATE_TABLE", "tornasole-state")
    with mock_aws():
        create_resources("trials")
        yield


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")

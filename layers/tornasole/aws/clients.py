"""Lazy, cached, injectable boto3 clients.

Clients are built on first use (so after ``moto.mock_aws`` has started in a
test), cached per process and per (service, endpoint, region) so one client is
shared by a reader's thread pool, and never created at import time. Endpoints
come only from boto3's own ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_<SERVICE>``
variables, which boto3 reads itself. Tests call ``clear_client_cache()``.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from tornasole.exceptions import ConfigurationError

__all__ = [
    "NoRegionConfigured",
    "client",
    "s3_client",
    "dynamodb_client",
    "events_client",
    "sns_client",
    "clear_client_cache",
]

_lock = threading.Lock()
_cache: dict[tuple[str, str | None, str | None, str | None, float | None], Any] = {}
# One boto3 session per identity: a session loads botocore's service models once and every client
# made from it reuses them (a new session per client costs up to a second). Sessions cache resolved
# credentials, hence the key; clearing the client cache keeps them.
_sessions: dict[tuple[str | None, str | None], Any] = {}


class NoRegionConfigured(ConfigurationError):
    """No AWS region in the environment or the AWS config: the message says which variable to set."""


# Readers fetch many small ranges concurrently: size the pool for it.
MAX_POOL_CONNECTIONS = 64


def _key(
    service: str, read_timeout: float | None = None
) -> tuple[str, str | None, str | None, str | None, float | None]:
    env_service = f"AWS_ENDPOINT_URL_{service.upper()}"
    return (
        service,
        os.environ.get(env_service),
        os.environ.get("AWS_ENDPOINT_URL"),
        os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
        read_timeout,
    )


def client(service: str, *, read_timeout: float | None = None) -> Any:
    """The process-wide client for ``service``, created on first use.

    ``read_timeout``: seconds to wait for a response, for calls that legitimately take longer than
    botocore's 60 s (a synchronous Lambda invocation); its own cached client.
    """
    key = _key(service, read_timeout)
    cached = _cache.get(key)
    if cached is not None:
        return cached
    with _lock:
        cached = _cache.get(key)
        if cached is None:
            from tornasole.extras import require

            require("s3", f"AWS access ({service}, e.g. an s3:// path)")
            import boto3
            from botocore.config import Config

            config = Config(
                retries={"mode": "standard", "max_attempts": 5},
                max_pool_connections=MAX_POOL_CONNECTIONS,
                **({"read_timeout": read_timeout} if read_timeout is not None else {}),
            )
            identity = (os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_PROFILE"))
            session = _sessions.get(identity)
            if session is None:
                session = _sessions[identity] = boto3.session.Session()
            cached = _new_client(session, service, config)
            _cache[key] = cached
        return cached


def _new_client(session: Any, service: str, config: Any) -> Any:
    """``session.client``, with botocore's "You must specify a region." said as what to set.

    The one place a missing region is translated: every client is made here, and the message
    names the variables and the local mode's ``export`` lines, which are the usual fix.
    """
    from botocore.exceptions import NoRegionError

    try:
        return session.client(service, config=config)
    except NoRegionError as exc:
        raise NoRegionConfigured(
            f"no AWS region is set for {service}: export AWS_DEFAULT_REGION (or AWS_REGION), e.g. "
            "AWS_DEFAULT_REGION=us-east-1, or set region in ~/.aws/config; for the local mode, run in "
            "this shell the `export` lines `tornasole local up` printed (region, endpoint, credentials, "
            "state table)"
        ) from exc


def s3_client() -> Any:
    return client("s3")


def dynamodb_client() -> Any:
    return client("dynamodb")


def events_client() -> Any:
    return client("events")


def sns_client() -> Any:
    return client("sns")


def clear_client_cache() -> None:
    """Forget every cached client (tests; or after changing endpoint variables)."""
    with _lock:
        _cache.clear()

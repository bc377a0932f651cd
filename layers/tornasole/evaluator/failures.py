"""Which failures are whose: transient (retry the step), the data's (record it), the rule's (Error).

Why three kinds: a rule's status is terminal once it is ``Error``, so only a
broken rule may put it there. A throttled or failing AWS call says nothing
about the step or the rule: it must propagate, so the step stays pending and
the invocation (or the scheduled check) tries again. A corrupt or unreadable
file is a fact about one step: it is recorded against that step, and the rule
goes on with the steps after it.

The storage layer translates botocore errors into builtins once, keeping the
original as ``__cause__`` (``tornasole.storage.s3``), and the trial loader wraps
those again, so the classification walks the whole cause chain.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = [
    "TRANSIENT_CODES",
    "TransientError",
    "UnusableCollections",
    "causes",
    "is_data_error",
    "is_transient",
    "raise_if_transient",
]

#: AWS error codes meaning "try again" (throttling, server-side and timeouts).
TRANSIENT_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "RequestThrottled",
        "RequestThrottledException",
        "SlowDown",
        "SlowDownRead",
        "SlowDownWrite",
        "InternalError",
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "RequestTimeout",
        "RequestTimeoutException",
        "TransactionInProgressException",
        "LimitExceededException",
    }
)


class TransientError(Exception):
    """A retryable failure while evaluating a step: the step stays pending and is tried again."""


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its ``__cause__`` / ``__context__`` chain (each once)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def _one_is_transient(exc: BaseException) -> bool:
    if isinstance(exc, TransientError):
        return True
    try:
        from botocore.exceptions import (
            ClientError,
            ConnectionClosedError,
            ConnectTimeoutError,
            EndpointConnectionError,
            ReadTimeoutError,
        )
    except ImportError:  # pragma: no cover - botocore ships with the Lambda runtime
        return False
    if isinstance(
        exc, (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, ConnectionClosedError)
    ):
        return True
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return str(err.get("Code", "")) in TRANSIENT_CODES or int(status) >= 500 or int(status) == 429
    return isinstance(exc, (TimeoutError, ConnectionError))


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` (or anything in its cause chain) is a retryable AWS / network failure."""
    return any(_one_is_transient(e) for e in causes(exc))


def raise_if_transient(exc: BaseException) -> None:
    """Re-raise ``exc`` as a ``TransientError`` when it is retryable; otherwise return."""
    if is_transient(exc):
        raise TransientError(f"retryable: {type(exc).__name__}: {exc}") from exc


def is_data_error(exc: BaseException) -> bool:
    """A problem of the step's files (format, unreadable object), not of the rule's code."""
    from tornasole.exceptions import FormatError

    return any(isinstance(e, (FormatError, OSError)) for e in causes(exc))


class UnusableCollections(ValueError):
    """The job's collections file cannot be used; the job's error and its rules already say why."""

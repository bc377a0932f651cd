"""Invoke one function's handler as Lambda would: a context, retries, and nothing escapes.

Lambda isolates a failing invocation: whatever the code raises (an exception,
a rule's ``sys.exit()``), the function is reported failed and retried (async
invocations: two more tries), and the service carries on. Here the handler
runs on a worker thread of the local mode, so the invoker catches
``BaseException`` too: a ``SystemExit`` must not take the worker thread down
and silently stop the whole pipeline.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tornasole.stack_spec import FunctionSpec

__all__ = ["FunctionInvoker", "Invocation", "LocalLambdaContext", "MAX_ATTEMPTS"]

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 3  # Lambda's async invocation: 1 try + 2 retries
Handler = Callable[[dict[str, Any], Any], Any]


@dataclass(frozen=True)
class LocalLambdaContext:
    """The attributes Powertools reads from a Lambda context."""

    function_name: str
    memory_limit_in_mb: int = 1024
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:000000000000:function:local"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


@dataclass(frozen=True)
class Invocation:
    """The outcome of one event after its retries: ``ok`` and the handler's last return value."""

    ok: bool
    result: Any = None
    error: str | None = None


class FunctionInvoker:
    """One function of the stack: its handler, its retry policy, its failures reported once."""

    def __init__(
        self,
        fn: FunctionSpec,
        handler: Handler,
        on_error: Callable[[str], None],
        attempts: int = MAX_ATTEMPTS,
        retry_delay: float = 0.2,
        stop: threading.Event | None = None,
        after: Callable[[], None] | None = None,
    ) -> None:
        self.fn = fn
        self.handler = handler
        self.on_error = on_error
        self.attempts = attempts
        self.retry_delay = retry_delay
        self._stop = stop or threading.Event()
        self._after = after  # run after every attempt (local housekeeping)

    def __call__(self, event: dict[str, Any]) -> Invocation:
        error = ""
        for attempt in range(1, self.attempts + 1):
            context = LocalLambdaContext(function_name=self.fn.id, memory_limit_in_mb=self.fn.memory_mb)
            try:
                result = self.handler(event, context)
                self._housekeeping()
                return Invocation(True, result)
            except KeyboardInterrupt:
                raise  # only ever raised on the main thread (a synchronous call): the user's Ctrl-C
            except BaseException as exc:  # SystemExit from user code is a failed invocation
                self._housekeeping()
                error = f"{type(exc).__name__}: {exc}"
                if attempt < self.attempts:
                    log.warning(
                        "%s failed (attempt %d of %d), retrying: %s",
                        self.fn.id,
                        attempt,
                        self.attempts,
                        error,
                    )
                    if self._stop.wait(self.retry_delay * attempt):
                        break
        message = f"{self.fn.id} failed {self.attempts} times: {error}"
        self.on_error(message)
        return Invocation(False, error=message)

    def _housekeeping(self) -> None:
        if self._after is not None:
            try:
                self._after()
            except Exception as exc:
                log.warning("%s: local housekeeping failed: %r", self.fn.id, exc)

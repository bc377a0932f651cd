"""Each invocation's log lines carry its own Lambda context, also when invocations run as threads."""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass

import pytest

from tornasole.lambda_support.observability import inject_invocation_context, logger


@dataclass
class _Context:
    """The attributes of Lambda's context object that Powertools reads."""

    aws_request_id: str
    function_name: str = "tornasole-evaluator"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:tornasole-evaluator"


class _Lines(logging.Handler):
    """Formats records with the handlers' own Powertools formatter (JSON), as CloudWatch would get them."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:  # logging.Handler.handle holds self.lock
        self.lines.append(json.loads(logger.registered_formatter.format(record)))


@pytest.fixture
def lines():
    handler = _Lines()
    library = logging.getLogger("tornasole")  # where every tornasole.* logger's records go
    library.addHandler(handler)
    logger.addHandler(handler)
    try:
        yield handler.lines
    finally:
        library.removeHandler(handler)
        logger.removeHandler(handler)


def test_interleaved_invocations_keep_their_own_request_id(lines):
    """A starts, B starts (before Powertools' decorator, B's keys replaced A's), then A logs."""
    b_started, a_logged = threading.Event(), threading.Event()
    library_log = logging.getLogger("tornasole.tests.invocation")

    @inject_invocation_context
    def handler(event, context):
        if event == "a":
            assert b_started.wait(5)
        library_log.info("from the library", extra={"who": event})
        logger.info("from the handler", extra={"who": event})
        if event == "a":
            a_logged.set()
        else:
            assert a_logged.wait(5)  # B's invocation is still running while A logs
        return event

    results: dict[str, str] = {}

    def invoke(who: str) -> None:
        results[who] = handler(who, _Context(aws_request_id=f"request-{who}"))

    a = threading.Thread(target=invoke, args=("a",))
    a.start()

    @inject_invocation_context
    def starter(event, context):  # B's context is set before B waits: the interleaving above
        b_started.set()
        return handler.__wrapped__(event, context)

    b = threading.Thread(target=lambda: results.__setitem__("b", starter("b", _Context("request-b"))))
    b.start()
    a.join(10)
    b.join(10)
    assert results == {"a": "a", "b": "b"}

    mine = [line for line in lines if "who" in line]
    assert len(mine) == 4
    for line in mine:
        assert line["function_request_id"] == f"request-{line['who']}", line
        assert line["function_name"] == "tornasole-evaluator"


def test_keys_are_cleared_after_the_invocation_even_when_it_raises(lines):
    @inject_invocation_context
    def failing(event, context):
        logger.info("inside")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        failing({}, _Context(aws_request_id="request-x"))
    logger.info("outside")
    inside, outside = (next(line for line in lines if line["message"] == m) for m in ("inside", "outside"))
    assert inside["function_request_id"] == "request-x"
    assert "cold_start" in inside
    assert "function_request_id" not in outside
    assert logger.thread_safe_get_current_keys() == {}


def test_cold_start_is_true_once_per_process(lines):
    from tornasole.lambda_support import observability

    observability._cold[0] = True  # as at a cold start

    @inject_invocation_context
    def handler(event, context):
        logger.info("invoked", extra={"n": event})

    for n in range(3):
        handler(n, _Context(aws_request_id=f"r{n}"))
    cold = [line["cold_start"] for line in lines if line["message"] == "invoked"]
    assert cold == [True, False, False]

"""Work the embedded moto server repeats on every request though its answer never changes.

moto's EventBridge delivers each event to a rule's targets through its input
transformer, which compiles every JSONPath of the paths map (by default the
event's ``$.detail-type``, ``$.source``, ...) with ``jsonpath_ng.ext.parse``;
each call builds a new PLY parser, LR tables included. That was a fifth of the
server's time per request in the local mode. A parsed JSONPath is an immutable
expression, so while a local mode runs the function is memoized (the same
expressions, the same matches); ``uncache`` puts jsonpath_ng's own back.

moto's SQS checks each message it hands out against the queue's retention
period by building the queue's whole attribute map (every attribute, found by
introspection) to read that one number: a twentieth of the local mode's CPU.
While cached, the check reads the queue's retention period directly: the same
comparison, the same answer. And every request to any service listed its
response class's methods (``inspect.getmembers``) to find the action's: the
list is kept per class.

moto's SQS is not safe for two threads receiving from one queue at once: both
can see a message visible before either marks it received, and both get it.
The local mode's workers receive concurrently, so while cached each pass over a
queue's messages is made under a lock (the long poll waits outside it): a message
goes to one receiver until its visibility timeout passes, as on SQS.

DynamoDB's expression parsing: ``tornasole.local.moto_expressions``;
its attribute values in answers: ``tornasole.local.moto_serialize``.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

__all__ = ["cache", "uncache"]

_lock = threading.Lock()
# While cached: jsonpath_ng.ext.parse, the retention check, method_names_from_class, receive_message.
_original: list[Any] = []
_RECEIVE = threading.Lock()
MAX_EXPRESSIONS = 256


def cache() -> None:
    """Memoize ``jsonpath_ng.ext.parse`` and moto's action lookup; shorten its retention check."""
    import jsonpath_ng.ext

    from tornasole.local import moto_expressions, moto_serialize

    with _lock:
        moto_expressions.cache()
        moto_serialize.patch()
        if _original:
            return
        import moto.core.responses
        from moto.sqs.models import SQSBackend

        original = jsonpath_ng.ext.parse
        names = moto.core.responses.method_names_from_class
        receive = SQSBackend.receive_message
        _original.extend([original, SQSBackend.is_message_valid_based_on_retention_period, names, receive])
        jsonpath_ng.ext.parse = functools.lru_cache(maxsize=MAX_EXPRESSIONS)(original)
        SQSBackend.is_message_valid_based_on_retention_period = _within_retention
        moto.core.responses.method_names_from_class = functools.lru_cache(maxsize=None)(names)
        SQSBackend.receive_message = _one_receiver_at_a_time(receive)


def uncache() -> None:
    import jsonpath_ng.ext

    from tornasole.local import moto_expressions, moto_serialize

    with _lock:
        moto_expressions.uncache()
        moto_serialize.unpatch()
        if _original:
            import moto.core.responses
            from moto.sqs.models import SQSBackend

            SQSBackend.receive_message = _original.pop()
            moto.core.responses.method_names_from_class = _original.pop()
            SQSBackend.is_message_valid_based_on_retention_period = _original.pop()
            jsonpath_ng.ext.parse = _original.pop()


def _within_retention(backend: Any, queue_name: str, message: Any) -> bool:
    """moto's ``is_message_valid_based_on_retention_period``, without building every queue attribute."""
    from moto.core.utils import unix_time

    retention_period = int(backend.get_queue(queue_name).message_retention_period)
    return retention_period + message.sent_timestamp / 1000 > unix_time()


def _one_receiver_at_a_time(original: Any) -> Any:
    """moto's ``receive_message``, each pass over the queue under one lock; the long poll outside it."""

    @functools.wraps(original)
    def receive_message(
        backend: Any,
        queue_name: str,
        count: int,
        wait_seconds_timeout: int,
        visibility_timeout: int,
        message_attribute_names: list[str] | None = None,
    ) -> list[Any]:
        from moto.core.utils import unix_time

        deadline = unix_time() + wait_seconds_timeout
        while True:
            with _RECEIVE:  # one pass, not waiting: moto's own selection, marking and copying
                got = original(backend, queue_name, count, 0, visibility_timeout, message_attribute_names)
            if got or not wait_seconds_timeout or unix_time() > deadline:
                return got
            backend.get_queue(queue_name).wait_for_messages(1)  # woken as soon as one is visible

    return receive_message

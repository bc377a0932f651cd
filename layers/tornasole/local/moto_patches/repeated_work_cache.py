"""Work the embedded moto server repeats on every request though its answer never changes.

A speed patch (``tornasole.local.moto_patches``). moto's EventBridge delivers
each event to a rule's targets through its input transformer, which compiles
every JSONPath of the paths map (by default the event's ``$.detail-type``,
``$.source``, ...) with ``jsonpath_ng.ext.parse``; each call builds a new PLY
parser, LR tables included. That was a fifth of the server's time per request
in the local mode. A parsed JSONPath is an immutable expression, so while a
local mode runs the function is memoized (the same expressions, the same
matches); ``uncache`` puts jsonpath_ng's own back.

moto's SQS checks each message it hands out against the queue's retention
period by building the queue's whole attribute map (every attribute, found by
introspection) to read that one number: a twentieth of the local mode's CPU.
While cached, the check reads the queue's retention period directly: the same
comparison, the same answer. And every request to any service listed its
response class's methods (``inspect.getmembers``) to find the action's: the
list is kept per class.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

__all__ = ["cache", "uncache"]

_lock = threading.Lock()
# While cached: jsonpath_ng.ext.parse, the retention check, method_names_from_class.
_original: list[Any] = []
MAX_EXPRESSIONS = 256


def cache() -> None:
    """Memoize ``jsonpath_ng.ext.parse`` and moto's action lookup; shorten its retention check."""
    import jsonpath_ng.ext

    with _lock:
        if _original:
            return
        import moto.core.responses
        from moto.sqs.models import SQSBackend

        original = jsonpath_ng.ext.parse
        names = moto.core.responses.method_names_from_class
        _original.extend([original, SQSBackend.is_message_valid_based_on_retention_period, names])
        jsonpath_ng.ext.parse = functools.lru_cache(maxsize=MAX_EXPRESSIONS)(original)
        SQSBackend.is_message_valid_based_on_retention_period = _within_retention
        moto.core.responses.method_names_from_class = functools.lru_cache(maxsize=None)(names)


def uncache() -> None:
    import jsonpath_ng.ext

    with _lock:
        if _original:
            import moto.core.responses
            from moto.sqs.models import SQSBackend

            moto.core.responses.method_names_from_class = _original.pop()
            SQSBackend.is_message_valid_based_on_retention_period = _original.pop()
            jsonpath_ng.ext.parse = _original.pop()


def _within_retention(backend: Any, queue_name: str, message: Any) -> bool:
    """moto's ``is_message_valid_based_on_retention_period``, without building every queue attribute."""
    from moto.core.utils import unix_time

    retention_period = int(backend.get_queue(queue_name).message_retention_period)
    return retention_period + message.sent_timestamp / 1000 > unix_time()

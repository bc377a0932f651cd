"""Work the embedded moto server repeats on every request though its answer never changes.

moto's EventBridge delivers each event to a rule's targets through its input
transformer, which compiles every JSONPath of the paths map (by default the
event's ``$.detail-type``, ``$.source``, ...) with ``jsonpath_ng.ext.parse``;
each call builds a new PLY parser, LR tables included. That was a fifth of the
server's time per request in the local mode. A parsed JSONPath is an immutable
expression, so while a local mode runs the function is memoized (the same
expressions, the same matches); ``uncache`` puts jsonpath_ng's own back.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

__all__ = ["cache", "uncache"]

_lock = threading.Lock()
_original: list[Any] = []  # jsonpath_ng.ext.parse while cached
MAX_EXPRESSIONS = 256


def cache() -> None:
    """Memoize ``jsonpath_ng.ext.parse`` (idempotent)."""
    import jsonpath_ng.ext

    with _lock:
        if _original:
            return
        original = jsonpath_ng.ext.parse
        _original.append(original)
        jsonpath_ng.ext.parse = functools.lru_cache(maxsize=MAX_EXPRESSIONS)(original)


def uncache() -> None:
    import jsonpath_ng.ext

    with _lock:
        if _original:
            jsonpath_ng.ext.parse = _original.pop()

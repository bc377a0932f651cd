"""One SQS receiver at a time per pass over a queue in the embedded moto server: a message goes to one.

A correctness patch (``tornasole.local.moto_patches``). moto's SQS is not safe
for two threads receiving from one queue at once: both can see a message
visible before either marks it received, and both get it. The local mode's
workers receive concurrently, so each pass over a queue's messages (moto's own
selection, marking and copying) is made under one lock, and the long poll
waits outside it: a message goes to one receiver until its visibility timeout
passes, as on SQS.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

__all__ = ["one_receiver_at_a_time", "patch_receive", "unpatch_receive"]

_LOCK = threading.Lock()
_ORIGINALS: list[Any] = []  # SQSBackend.receive_message as moto defines it, while patched


def patch_receive() -> None:
    """Wrap ``SQSBackend.receive_message`` (idempotent)."""
    from moto.sqs.models import SQSBackend

    if not _ORIGINALS:
        _ORIGINALS.append(SQSBackend.__dict__["receive_message"])
        SQSBackend.receive_message = one_receiver_at_a_time(SQSBackend.receive_message)  # type: ignore[method-assign]


def unpatch_receive() -> None:
    """Put moto's own ``receive_message`` back."""
    from moto.sqs.models import SQSBackend

    if _ORIGINALS:
        SQSBackend.receive_message = _ORIGINALS.pop()  # type: ignore[method-assign]


def one_receiver_at_a_time(original: Any) -> Any:
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
            with _LOCK:  # one pass, not waiting: moto's own selection, marking and copying
                got = original(backend, queue_name, count, 0, visibility_timeout, message_attribute_names)
            if got or not wait_seconds_timeout or unix_time() > deadline:
                return got
            backend.get_queue(queue_name).wait_for_messages(1)  # woken as soon as one is visible

    return receive_message

"""The thread pool behind ``read_many``, shared by both backends.

Readers fetch hundreds of small ranges per step; one pool per storage instance,
created on first use (never at import or construction), bounds the number of
concurrent requests. Threads, never processes: Lambda has no ``/dev/shm`` and
the work is I/O bound anyway.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, Self

from tornasole.config import READ_THREADS
from tornasole.storage.base import ReadRequest

__all__ = ["ThreadedReads"]


class ThreadedReads:
    """Mixin: a lazily created thread pool, ordered batch reads with an error policy, ``close()``."""

    def __init__(self, max_workers: int | None, default_workers: int) -> None:
        if max_workers is None:
            max_workers = int(os.environ.get(READ_THREADS) or default_workers)
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self.max_workers = max_workers
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._thread_prefix = f"tornasole-{type(self).__name__}-{id(self):x}"

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix=self._thread_prefix)
            return self._pool

    def _run_batch(
        self,
        requests: Sequence[ReadRequest],
        on_error: Literal["raise", "return"],
        read_one: Callable[[ReadRequest], bytes],
    ) -> list[bytes | BaseException]:
        """Apply ``read_one`` to every request concurrently; results in request order."""
        if on_error not in ("raise", "return"):
            raise ValueError(f"on_error must be 'raise' or 'return', got {on_error!r}")

        def task(request: ReadRequest) -> bytes | BaseException:
            if on_error == "raise":
                return read_one(request)
            try:
                return read_one(request)
            except Exception as exc:  # the caller asked for errors in place
                return exc

        requests = list(requests)
        # Inline when there is nothing to overlap, or when already on one of our
        # workers (a nested batch waiting on its own pool could deadlock).
        if len(requests) <= 1 or threading.current_thread().name.startswith(self._thread_prefix):
            return [task(r) for r in requests]
        return list(self._executor().map(task, requests))

    def close(self) -> None:
        """Shut the pool down (waiting for running reads); the instance stays usable and re-creates it."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

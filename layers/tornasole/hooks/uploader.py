"""Writing saved steps off the training thread: one background thread, a bounded queue, retries.

Ordering contract (DESIGN.md): for each (step, worker) the event file is
published before its index file (``TrialWriter.write_step`` does that), steps
are published in the order they were saved (one thread, FIFO queue), the
collections file after the first saved step, and the end marker last, after
the queue has drained. If an event file cannot be written the step's index is
not written either, so no reader is ever told about data that is not there.

A failing write is retried with exponential backoff (:class:`RetryingStorage`);
if it still fails it is reported once with ``logging.error`` (later failures at
debug level, and a count at close) and never raised into training. The queue
is bounded so a slow store applies back-pressure instead of exhausting memory.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tornasole.modes import ModeKeys
from tornasole.storage.base import Storage

__all__ = ["RetryingStorage", "StepJob", "AsyncTrialWriter"]

logger = logging.getLogger(__name__)


class RetryingStorage:
    """A storage whose ``write_atomic`` retries with exponential backoff; other calls pass through.

    Examples
    --------
    >>> from tornasole.storage import get_storage
    >>> s = RetryingStorage(get_storage("/tmp"), attempts=3, base_delay=0.01)
    >>> s.attempts
    3
    """

    def __init__(self, inner: Storage, attempts: int = 5, base_delay: float = 0.2, max_delay: float = 5.0):
        if attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {attempts}")
        self.inner = inner
        self.attempts = attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.retries = 0  # total retried attempts, for tests and the close summary
        self.degraded = False

    def write_atomic(self, path: str, data: bytes) -> None:
        # After a write has failed every attempt, later writes get one attempt each until one
        # succeeds again: a store that is down must not stall training through back-pressure.
        attempts = 1 if self.degraded else self.attempts
        for attempt in range(1, attempts + 1):
            try:
                self.inner.write_atomic(path, data)
                self.degraded = False
                return
            except Exception as exc:  # noqa: BLE001 - any backend error is retried, then re-raised
                if attempt == attempts:
                    self.degraded = True
                    raise
                self.retries += 1
                delay = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
                logger.debug("write of %s failed (%s); retry %d in %.2fs", path, exc, attempt, delay)
                time.sleep(delay)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@dataclass
class StepJob:
    """Everything saved for one (step, worker): records are ``("t", tag, value, wall_time)``,
    ``("b", tags, values, wall_time)`` (one float32 scalar per tag: a block of statistics),
    ``("s", name, shape)`` or TensorBoard-only ``("tb_scalar" | "tb_histogram", tag, value, wall_time)``;
    ``materialize`` turns framework values into numpy on the writer thread."""

    step: int
    mode: ModeKeys
    mode_step: int
    worker: str
    records: list[tuple[Any, ...]] = field(default_factory=list)
    materialize: Callable[[list[tuple[Any, ...]]], list[tuple[Any, ...]]] | None = None


_STOP = object()


class AsyncTrialWriter:
    """Publishes :class:`StepJob` s, the collections file and the end marker from one daemon thread."""

    def __init__(
        self, trial_dir: str, storage: Storage, *, max_queue: int = 16, tensorboard: Any = None
    ) -> None:
        self.trial_dir = trial_dir
        self.storage = storage
        self.tensorboard = tensorboard  # a tornasole.tensorboard.TensorBoardWriter, or None
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max(1, max_queue))
        self._writers: dict[str, Any] = {}
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.failures = 0
        self.steps_written = 0
        self._closed = False

    # -- training thread --------------------------------------------------------------------
    def submit_step(self, job: StepJob) -> None:
        self._put(("step", job))

    def submit_collections(
        self, worker: str, collections: dict[str, dict[str, Any]], num_workers: int
    ) -> None:
        self._put(("collections", worker, collections, num_workers))

    def flush(self) -> None:
        """Block until everything submitted so far is published (or has failed)."""
        if self._thread is not None:
            self._queue.join()

    def close(self, end_marker_worker: str | None) -> None:
        """Drain, then write the end marker (``None``: no marker) and stop the thread."""
        if self._closed:
            return
        self._closed = True
        if end_marker_worker is not None:
            self._put(("end", end_marker_worker), force=True)
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread.join()
        for trial_writer in self._writers.values():
            trial_writer.close()  # the step directories it made ahead for steps that never came
        if self.failures > 1:
            logger.warning("Tornasole: %d writes to %s failed in total", self.failures, self.trial_dir)

    def _put(self, item: tuple[Any, ...], force: bool = False) -> None:
        if self._closed and not force:
            raise RuntimeError("the hook's writer is closed")
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tornasole-writer", daemon=True)
                self._thread.start()
        self._queue.put(item)

    # -- writer thread ----------------------------------------------------------------------
    def _trial_writer(self, worker: str) -> Any:
        tw = self._writers.get(worker)
        if tw is None:
            from tornasole.format.writer import TrialWriter

            tw = self._writers[worker] = TrialWriter(self.trial_dir, worker=worker, storage=self.storage)
        return tw

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                self._handle(item)
            except Exception as exc:  # noqa: BLE001 - never let the writer thread die
                self._report(item, exc)
            finally:
                self._queue.task_done()

    def _handle(self, item: tuple[Any, ...]) -> None:
        kind = item[0]
        if kind == "step":
            self._write_step(item[1])
        elif kind == "collections":
            _, worker, collections, num_workers = item
            self._trial_writer(worker).write_collections(collections, num_workers)
        elif kind == "end":
            self._trial_writer(item[1]).write_end_marker()

    def _write_step(self, job: StepJob) -> None:
        from tornasole.format.writer import StepWriter

        records = job.materialize(job.records) if job.materialize is not None else job.records
        sw = StepWriter(job.step, job.worker, mode=job.mode, mode_step=job.mode_step)
        summaries, tensors = [], []
        for rec in records:
            kind = rec[0]
            if kind == "t":
                tensors.append(rec[1:])  # (tag, value, wall_time): encoded together below, in order
            elif kind == "b":  # in order: the records before it first
                sw.add_tensors(tensors)
                tensors = []
                sw.add_scalar_block(rec[1], rec[2], rec[3])
            elif kind == "s":
                sw.add_shape(rec[1], rec[2])
            else:  # "tb_scalar" / "tb_histogram": TensorBoard only
                summaries.append((kind[3:], rec[1], rec[2], rec[3]))
        sw.add_tensors(tensors)
        if not (sw.is_empty and summaries):
            self._trial_writer(job.worker).write_step(sw)
            self.steps_written += 1
        if summaries and self.tensorboard is not None:
            try:
                self.tensorboard.write_step(job.mode, job.step, summaries)
            except Exception as exc:  # noqa: BLE001 - reported like any other write; the step is written
                self._report(("tensorboard", job), exc)

    def _report(self, item: tuple[Any, ...], exc: BaseException) -> None:
        self.failures += 1
        what = (
            f"step {item[1].step}"
            if item[0] == "step"
            else f"TensorBoard summaries of step {item[1].step}"
            if item[0] == "tensorboard"
            else item[0]
        )
        if self.failures == 1:
            logger.error(
                "Tornasole: could not write %s to %s: %s: %s. Training continues; "
                "later write failures are counted and logged at debug level.",
                what,
                self.trial_dir,
                type(exc).__name__,
                exc,
            )
        else:
            logger.debug("Tornasole: could not write %s to %s: %r", what, self.trial_dir, exc)

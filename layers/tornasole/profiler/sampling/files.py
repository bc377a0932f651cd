"""Profiler files built in memory and put whole when they close: one closed file, one object.

SageMaker's profiler appends to a local file and uploads it once closed; here the open file is a buffer
and closing it is one ``write_atomic`` through :mod:`tornasole.storage` (a local rename, or one S3 PUT),
so neither a reader nor an S3 notification ever sees half a file. A file closes every
``close_interval_s`` seconds or when it reaches ``max_bytes``, as SageMaker rotates its files; a file never
closes in the second it opened, so two files of one node never share a name.

A put that fails keeps the file's bytes for the next try (one file held, at most: the next file closing
while one still waits replaces it, and the loss is counted). ``fail_threshold`` failures in a row raise
:class:`ProfilerWriteError`: the profiler turns itself off rather than retry for ever.
"""

from __future__ import annotations

import logging
from typing import Any

from tornasole.profiler.format import paths, system_records, trace_events
from tornasole.profiler.format.system_records import SystemRecord

__all__ = ["ProfilerWriteError", "SystemMetricsFile", "TraceEventsFile"]

logger = logging.getLogger(__name__)


class ProfilerWriteError(OSError):
    """Profiler files could not be written ``fail_threshold`` times in a row."""


class _RotatingFile:
    def __init__(
        self, storage: Any, root: str, *, max_bytes: int, close_interval_s: float, fail_threshold: int
    ) -> None:
        self._storage = storage
        self._root = root.rstrip("/")
        self._max_bytes = max_bytes
        self._close_interval_s = close_interval_s
        self._fail_threshold = fail_threshold
        self._opened_at: float | None = None
        self._size = 0
        self._failed_put: tuple[str, bytes] | None = None
        self._failures = 0
        self.files_written: list[str] = []
        self.files_lost = 0

    def _due(self, now: float) -> bool:
        if self._opened_at is None:
            return False
        full = self._size >= self._max_bytes or now - self._opened_at >= self._close_interval_s
        return full and int(now) > int(self._opened_at)

    def _put(self, name: str, data: bytes) -> None:
        if self._failed_put is not None:
            pending, self._failed_put = self._failed_put, None
            self._try_put(*pending)
            if self._failed_put is not None:  # still failing: this file replaces it
                self.files_lost += 1
                self._failed_put = None
        self._try_put(name, data)

    def _try_put(self, name: str, data: bytes) -> None:
        path = f"{self._root}/{name}"
        try:
            self._storage.write_atomic(path, data)
        except OSError as error:
            self._failures += 1
            self._failed_put = (name, data)
            if self._failures >= self._fail_threshold:
                raise ProfilerWriteError(
                    f"profiler file {path} could not be written {self._failures} times in a row: {error}"
                ) from error
            if self._failures == 1:
                logger.warning(
                    "Tornasole profiler: writing %s failed (%s); retrying at the next file", path, error
                )
            return
        self._failures = 0
        self.files_written.append(path)

    def retry_failed(self) -> None:
        if self._failed_put is not None:
            pending, self._failed_put = self._failed_put, None
            self._try_put(*pending)


class SystemMetricsFile(_RotatingFile):
    """The open system-metrics file of one node: JSON lines, named by its first sample's second."""

    def __init__(self, storage: Any, root: str, node: str, **options: Any) -> None:
        super().__init__(storage, root, **options)
        self._node = node
        self._lines: list[str] = []
        self._first_ts = 0.0

    def add(self, records: list[SystemRecord], now: float) -> None:
        if self._due(now):
            self.close()
        if not records:
            return
        if self._opened_at is None:
            self._opened_at, self._first_ts = now, records[0].timestamp
        text = system_records.encode_records(records)
        self._lines.append(text)
        self._size += len(text)

    def close(self) -> None:
        """Put the open file (if it holds anything) and start a new one at the next sample."""
        if self._lines:
            data = "".join(self._lines).encode("utf-8")
            name = paths.system_file_name(self._first_ts, self._node)
            self._lines, self._size, self._opened_at = [], 0, None
            self._put(name, data)
        else:
            self.retry_failed()


class TraceEventsFile(_RotatingFile):
    """The open trace file of one process, encoded as its events arrive, named by the last one's end.

    Every file of a process shares one origin (``origin_us``, when its profiler started: no event of it
    starts earlier), so each event is encoded once, when it is added, never in a burst at close.
    Events are :data:`~tornasole.profiler.sampling.steps.RawEvent` tuples.
    """

    def __init__(self, storage: Any, root: str, node_id: str, *, origin_us: int, **options: Any) -> None:
        super().__init__(storage, root, **options)
        self._node_id = node_id
        self._origin_us = int(origin_us)
        self._encoder = trace_events.TraceFileEncoder(self._origin_us)
        self._end_us = -1
        self._last_end_us = -1

    def add(self, events: list[tuple], now: float) -> None:
        if self._due(now):
            self.close()
        if not events:
            return
        if self._opened_at is None:
            self._opened_at = now
        encoder, origin, end = self._encoder, self._origin_us, self._end_us
        for phase, name, start, duration, step_num, tid in events:
            if start < origin:  # a clock step back: the event is kept, at the origin
                duration, start = max(duration - (origin - start), 0), origin
            encoder.add(phase, name, start, duration, tid, step_num)
            if start + duration > end:
                end = start + duration
        self._end_us = end
        self._size = encoder.size

    def close(self) -> None:
        if not len(self._encoder):
            self.retry_failed()
            return
        encoder, end = self._encoder, max(self._end_us, self._last_end_us + 1)  # names unique, in order
        self._encoder = trace_events.TraceFileEncoder(self._origin_us)
        self._size, self._opened_at, self._end_us = 0, None, -1
        self._last_end_us = end
        self._put(paths.framework_file_name(end, self._node_id), encoder.text().encode("utf-8"))

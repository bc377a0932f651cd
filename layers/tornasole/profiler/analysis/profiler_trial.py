"""smdebug's ``ProfilerTrial``: a job's system and framework readers, waiting for data while it runs.

What a profiler rule loops over: ``wait_for_data(end, start)`` returns once files up to ``end`` exist,
and raises :class:`~tornasole.exceptions.NoMoreProfilerData` once training has ended (its end marker,
:func:`tornasole.profiler.format.paths.end_marker_paths`) and nothing at or after ``start`` will come.
Unlike smdebug's, waiting is bounded: a job that ended before writing anything raises instead of
polling forever, and ``max_wait_seconds`` caps any wait.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from tornasole.exceptions import NoMoreProfilerData
from tornasole.profiler.format import paths
from tornasole.profiler.readers.algorithm_metrics import AlgorithmMetricsReader
from tornasole.profiler.readers.base import resolve_profiler_root
from tornasole.profiler.readers.system_metrics import SystemMetricsReader
from tornasole.storage import Storage, get_storage, is_s3

__all__ = ["ProfilerTrial", "POLL_SECONDS_DEFAULT"]

logger = logging.getLogger(__name__)

#: smdebug polls every 10 s.
POLL_SECONDS_DEFAULT = 10.0


class ProfilerTrial:
    """The profiler output of one job (``trial_dir``: its profiler root, or the trial holding it).

    ``output_dir`` (local) is where a rule writes its reports, as in smdebug; it and its
    ``.sagemaker-ignore`` scratch folder are created. ``storage``, ``sleep`` and ``clock`` are injectable.
    """

    def __init__(
        self,
        name: str,
        trial_dir: str,
        output_dir: str | None = None,
        *,
        storage: Storage | None = None,
        poll_seconds: float = POLL_SECONDS_DEFAULT,
        max_wait_seconds: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self._storage = storage if storage is not None else get_storage(trial_dir)
        self.path = resolve_profiler_root(trial_dir, self._storage)
        self._poll_seconds = poll_seconds
        self._max_wait_seconds = max_wait_seconds
        self._sleep = sleep
        self._clock = clock
        self.logger = logger
        self.system_metrics_reader = SystemMetricsReader(self.path, storage=self._storage)
        self.framework_metrics_reader = AlgorithmMetricsReader(self.path, storage=self._storage)
        self.first_timestamp = 0
        self.get_first_timestamp()
        self.output_dir = output_dir
        self.temp_dir = None
        if output_dir:
            if is_s3(output_dir):
                raise ValueError(f"output_dir {output_dir!r} must be a local folder")
            self.temp_dir = str(Path(output_dir) / ".sagemaker-ignore")
            Path(self.temp_dir).mkdir(parents=True, exist_ok=True)

    def job_finished(self) -> bool:
        """Whether training has ended: an end marker exists at any place a profiler job leaves one."""
        return any(self._storage.exists(marker) for marker in paths.end_marker_paths(self.path))

    def _first_available(self) -> int:
        stamps = [
            reader.get_timestamp_of_first_available_file()
            for reader in (self.system_metrics_reader, self.framework_metrics_reader)
        ]
        return min((s for s in stamps if s), default=0)

    def get_first_timestamp(self) -> int:
        """The earliest time any file's name carries (epoch us), waiting until a file exists.

        Raises :class:`NoMoreProfilerData` when training ended without profiler data, ``TimeoutError``
        past ``max_wait_seconds``.
        """
        started = self._clock()
        while self.first_timestamp == 0:
            self.system_metrics_reader.refresh_event_file_list()
            self.framework_metrics_reader.refresh_event_file_list()
            self.first_timestamp = self._first_available()
            if self.first_timestamp:
                break
            if self.job_finished():
                raise NoMoreProfilerData(0)
            self._check_wait(started, f"the first profiler file under {self.path}")
            self.logger.info("waiting for profiler data under %s", self.path)
            self._sleep(self._poll_seconds)
        return self.first_timestamp

    def get_latest_timestamp(self) -> int:
        """The time (epoch us) up to which both kinds of data are available: the older of the two latest
        files (either alone when the job writes only one kind)."""
        self.system_metrics_reader.refresh_event_file_list()
        self.framework_metrics_reader.refresh_event_file_list()
        stamps = [
            reader.get_timestamp_of_latest_available_file()
            for reader in (self.system_metrics_reader, self.framework_metrics_reader)
        ]
        return min((s for s in stamps if s), default=0)

    def wait_for_data(self, end_time: int, start_time: int) -> None:
        """Return once data up to ``end_time`` (epoch us) is there, or training has ended.

        Raises :class:`NoMoreProfilerData` when training has ended and nothing at or after
        ``start_time`` exists.
        """
        started = self._clock()
        while end_time > self.get_latest_timestamp() and not self.job_finished():
            self._check_wait(started, f"profiler data up to {end_time} us under {self.path}")
            self._sleep(self._poll_seconds)
        if self.job_finished() and start_time >= self.get_latest_timestamp():
            raise NoMoreProfilerData(end_time)

    def _check_wait(self, started: float, what: str) -> None:
        if self._max_wait_seconds is not None and self._clock() - started >= self._max_wait_seconds:
            raise TimeoutError(f"waited {self._max_wait_seconds} s for {what}; the job has not ended")

    def get_system_metrics(self, start_time: int, end_time: int) -> list:
        """System samples of ``[start_time, end_time]`` (epoch us)."""
        return self.system_metrics_reader.get_events(start_time, end_time)

    def get_framework_metrics(self, start_time: int, end_time: int) -> list:
        """Trace events overlapping ``[start_time, end_time]`` (epoch us)."""
        return self.framework_metrics_reader.get_events(start_time, end_time)

"""smdebug's ``TrainingJob`` notebook helper, without SageMaker: a job is its trial path.

SageMaker's profiling notebooks start with ``tj = TrainingJob(name, region)`` (which asks SageMaker for
the job's profiler output path), then ``tj.wait_for_sys_profiling_data_to_be_available()`` and
``tj.wait_for_framework_profiling_data_to_be_available()``, then ``tj.get_systems_metrics_reader()``.
Here the first argument *is* the path: the trial (``s3://bucket/prefix/job``, a local folder) or its
``profiler-output``; everything after works unchanged. Waits end when data arrives, when the job's end
marker appears without data (:class:`~tornasole.exceptions.NoMoreProfilerData`), or after
``max_wait_seconds`` (``TimeoutError``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from tornasole.exceptions import NoMoreProfilerData
from tornasole.profiler.format import paths
from tornasole.profiler.readers.algorithm_metrics import AlgorithmMetricsReader
from tornasole.profiler.readers.base import MetricsReaderBase, resolve_profiler_root
from tornasole.profiler.readers.system_metrics import SystemMetricsReader
from tornasole.profiler.readers.units import us_since_epoch_to_human_readable_time
from tornasole.storage import Storage, get_storage

__all__ = ["TrainingJob"]

logger = logging.getLogger(__name__)


class TrainingJob:
    """A job's profiler output at ``path`` (trial or profiler root, local or ``s3://``).

    ``region`` is accepted for smdebug's signature and unused: nothing here calls SageMaker.
    """

    def __init__(
        self,
        path: str,
        region: str | None = None,
        *,
        storage: Storage | None = None,
        poll_seconds: float = 10.0,
        max_wait_seconds: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._storage = storage if storage is not None else get_storage(path)
        self.profiler_s3_output_path = resolve_profiler_root(path, self._storage)
        root = self.profiler_s3_output_path
        self.name = root.rstrip("/").removesuffix("/" + paths.PROFILER_DIR).rsplit("/", 1)[-1]
        self.profiler_config = None
        self.system_metrics_reader: SystemMetricsReader | None = None
        self.framework_metrics_reader: AlgorithmMetricsReader | None = None
        self._poll_seconds = poll_seconds
        self._max_wait_seconds = max_wait_seconds
        self._sleep = sleep
        self._clock = clock

    def get_systems_metrics_reader(self) -> SystemMetricsReader | None:
        return self.system_metrics_reader

    def get_framework_metrics_reader(self) -> AlgorithmMetricsReader | None:
        return self.framework_metrics_reader

    def get_config_and_profiler_s3_output_path(self) -> tuple[None, str]:
        return self.profiler_config, self.profiler_s3_output_path

    def job_finished(self) -> bool:
        """Whether the job's end marker exists."""
        return any(self._storage.exists(m) for m in paths.end_marker_paths(self.profiler_s3_output_path))

    def describe_training_job(self) -> dict:
        """The two status fields smdebug's helper prints, from the end marker (no SageMaker call)."""
        status = "Completed" if self.job_finished() else "InProgress"
        return {"TrainingJobName": self.name, "TrainingJobStatus": status, "SecondaryStatus": status}

    def _wait_for_files(self, reader: MetricsReaderBase, what: str) -> None:
        started = self._clock()
        while reader.get_timestamp_of_latest_available_file() == 0:
            if self.job_finished():
                raise NoMoreProfilerData(0)
            if self._max_wait_seconds is not None and self._clock() - started >= self._max_wait_seconds:
                raise TimeoutError(
                    f"waited {self._max_wait_seconds} s for {what} under {self.profiler_s3_output_path}"
                )
            logger.info("profiler data from %s not available yet", what)
            self._sleep(self._poll_seconds)
            reader.refresh_event_file_list()

    def wait_for_sys_profiling_data_to_be_available(self) -> None:
        """Return once a system-metrics file exists (the reader is then ``get_systems_metrics_reader()``)."""
        self.system_metrics_reader = SystemMetricsReader(self.profiler_s3_output_path, storage=self._storage)
        self._wait_for_files(self.system_metrics_reader, "the system")

    def wait_for_framework_profiling_data_to_be_available(self) -> None:
        """Return once a trace file exists (the reader is then ``get_framework_metrics_reader()``)."""
        self.framework_metrics_reader = AlgorithmMetricsReader(
            self.profiler_s3_output_path, storage=self._storage
        )
        self._wait_for_files(self.framework_metrics_reader, "the framework")
        latest = self.framework_metrics_reader.get_timestamp_of_latest_available_file()
        logger.info(
            "framework annotations up to %s us since the epoch (%s UTC)",
            latest,
            us_since_epoch_to_human_readable_time(latest),
        )

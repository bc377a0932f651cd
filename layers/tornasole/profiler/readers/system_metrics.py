"""smdebug's system-metrics readers: the samples under ``<profiler root>/system/``, by time and device."""

from __future__ import annotations

import bisect

from tornasole.profiler.readers.base import LocalRootReader, MetricsReaderBase, S3RootReader
from tornasole.profiler.readers.file_names import get_utctimestamp_us_since_epoch_from_system_profiler_file
from tornasole.profiler.readers.system_events import ProfilerSystemEvents

__all__ = ["SystemMetricsReader", "LocalSystemMetricsReader", "S3SystemMetricsReader"]


class SystemMetricsReader(MetricsReaderBase):
    """System samples of every node; files are known by their first sample's time (in the name)."""

    prefix = "system"

    def _make_parsers(self) -> None:
        self._SystemProfilerEventParser = ProfilerSystemEvents()

    def get_all_event_parsers(self) -> list:
        return [self._SystemProfilerEventParser]

    def _get_event_parser(self, event_file: str) -> ProfilerSystemEvents:
        return self._SystemProfilerEventParser

    def _get_timestamp_from_filename(self, event_file: str) -> int | None:
        return get_utctimestamp_us_since_epoch_from_system_profiler_file(event_file)

    def _parse_bytes(self, event_file: str, data: bytes) -> None:
        self._SystemProfilerEventParser.read_events_from_bytes(data, source=event_file)

    def _first_file_index(self, stamps: list[int], start_us: int) -> int:
        """A system file's name carries its first sample: the last file starting at or before the start
        holds the first samples of the window."""
        return max(bisect.bisect_right(stamps, start_us) - 1, 0)


class LocalSystemMetricsReader(LocalRootReader, SystemMetricsReader):
    """System samples under a local profiler root (``.../profiler-output``)."""


class S3SystemMetricsReader(S3RootReader, SystemMetricsReader):
    """System samples under an S3 profiler root (``s3://bucket/job/profiler-output``)."""

"""smdebug's framework-metrics ("algorithm") readers: trace events under ``<profiler root>/framework/``."""

from __future__ import annotations

import bisect

from tornasole.profiler.format import paths
from tornasole.profiler.readers.base import LocalRootReader, MetricsReaderBase, S3RootReader
from tornasole.profiler.readers.file_names import parse_trace_file_name
from tornasole.profiler.readers.trace_events import SMProfilerEvents

__all__ = ["AlgorithmMetricsReader", "LocalAlgorithmMetricsReader", "S3AlgorithmMetricsReader"]


class AlgorithmMetricsReader(MetricsReaderBase):
    """Trace events of every node; files are known by their last event's end time (in the name).

    One parser per file kind, as smdebug: python timelines (step and phase timings), model timelines
    (per-layer detail), Horovod and SMDataParallel timelines.
    """

    prefix = "framework"

    def _make_parsers(self) -> None:
        self._PythontimelineEventsParser = SMProfilerEvents()
        self._DetailedframeworkEventsParser = SMProfilerEvents(type="DetailedframeworkMetrics")
        self._HorovordEventsParser = SMProfilerEvents(type="HorovodMetrics")
        self._SMdataparallelEventsParser = SMProfilerEvents(type="SMDataParallelMetrics")
        self._parsers_by_suffix = {
            paths.PYTHON_TIMELINE_SUFFIX: self._PythontimelineEventsParser,
            paths.MODEL_TIMELINE_SUFFIX: self._DetailedframeworkEventsParser,
            "horovod_timeline.json": self._HorovordEventsParser,
            "smdataparallel_timeline.json": self._SMdataparallelEventsParser,
        }

    def get_all_event_parsers(self) -> list:
        return list(self._parsers_by_suffix.values())

    def _parsers_for(self, file_suffix_filter: list[str] | None) -> list:
        # With the in-memory cache, parsers hold events of earlier queries' files: a suffix filter must
        # also leave out the parsers of other kinds (smdebug returns them; its tests run without cache).
        if file_suffix_filter is None:
            return self.get_all_event_parsers()
        return [
            parser
            for suffix, parser in self._parsers_by_suffix.items()
            if any(suffix.endswith(wanted) or wanted.endswith(suffix) for wanted in file_suffix_filter)
        ]

    def _get_event_parser(self, event_file: str) -> SMProfilerEvents | None:
        parsed = parse_trace_file_name(event_file)
        return self._parsers_by_suffix.get(parsed.suffix) if parsed is not None else None

    def _get_timestamp_from_filename(self, event_file: str) -> int | None:
        parsed = parse_trace_file_name(event_file)
        return parsed.end_time_us if parsed is not None else None

    def _parse_bytes(self, event_file: str, data: bytes) -> None:
        parsed = parse_trace_file_name(event_file)
        if parsed is None:  # listed files all parse; a caller's own list may not
            self.logger.info("not a trace file name, skipped: %s", event_file)
            return
        self._parsers_by_suffix[parsed.suffix].read_events_from_bytes(
            data, node_id=parsed.node_id, source=event_file
        )

    def _first_file_index(self, stamps: list[int], start_us: int) -> int:
        """A trace file's name carries its last event's end: the first file ending at or after the start
        holds the first events of the window."""
        return bisect.bisect_left(stamps, start_us)


class LocalAlgorithmMetricsReader(LocalRootReader, AlgorithmMetricsReader):
    """Trace events under a local profiler root."""


class S3AlgorithmMetricsReader(S3RootReader, AlgorithmMetricsReader):
    """Trace events under an S3 profiler root."""

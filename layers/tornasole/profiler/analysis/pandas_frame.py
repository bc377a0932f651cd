"""smdebug's ``PandasFrame``: a job's system samples and trace events as pandas data frames.

The columns are smdebug's, so SageMaker's profiling notebooks (and the plots they draw) work unchanged:
system metrics ``timestamp, timestamp_us, value, system_metric, dimension, nodeID, type``; framework
metrics ``start_time, end_time, start_time_us, end_time_us, tid, pid, framework_metric, step, bytes,
process, nodeID``. ``*_us`` columns count from the job's first system file (smdebug's origin).

Events are read in windows of ``scan_interval`` microseconds, so memory stays bounded by one window's
events; an event spanning two windows is kept once (duplicate rows are dropped, as smdebug does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tornasole.extras import require
from tornasole.profiler.readers.algorithm_metrics import AlgorithmMetricsReader
from tornasole.profiler.readers.base import TIME_BUFFER_DEFAULT, resolve_profiler_root
from tornasole.profiler.readers.system_metrics import SystemMetricsReader
from tornasole.profiler.readers.units import (
    CONVERT_TO_MICROSECS,
    convert_utc_datetime_to_microseconds,
    us_since_epoch_to_human_readable_time,
)
from tornasole.storage import Storage, get_storage

__all__ = ["PandasFrame", "SYSTEM_COLUMNS", "FRAMEWORK_COLUMNS", "DATALOADER_COLUMNS"]

SYSTEM_COLUMNS = ["timestamp", "timestamp_us", "value", "system_metric", "dimension", "nodeID", "type"]
FRAMEWORK_COLUMNS = [
    "start_time",
    "end_time",
    "start_time_us",
    "end_time_us",
    "tid",
    "pid",
    "framework_metric",
    "step",
    "bytes",
    "process",
    "nodeID",
]
DATALOADER_COLUMNS = [
    "start_time",
    "end_time",
    "start_time_us",
    "end_time_us",
    "duration_us",
    "pid",
    "framework_metric",
    "step",
    "worker_id",
    "num_workers",
    "pin_memory",
    "process",
    "node_id",
]


def _pandas() -> Any:
    require("notebook", "PandasFrame")
    import pandas

    return pandas


def _arg(event: Any, key: str, default: Any) -> Any:
    args = event.event_args
    return args[key] if args is not None and key in args else default


def _step(event: Any) -> int:
    try:
        return int(_arg(event, "step_num", -1))
    except (TypeError, ValueError):
        return -1


def _metric_name(event: Any) -> str:
    return _arg(event, "layer_name", None) or _arg(event, "name", None) or event.event_name


def _selected(event: Any, selected: Sequence[str]) -> bool:
    return not selected or event.event_name in selected or event.event_phase in selected


class PandasFrame:
    """The profiler output under ``path`` (a profiler root or the trial holding it; local or ``s3://``)."""

    def __init__(
        self,
        path: str,
        use_in_memory_cache: bool = False,
        scan_interval: int = 5_000_000_000,
        *,
        storage: Storage | None = None,
    ) -> None:
        self.pd = _pandas()
        if int(scan_interval) <= 0:
            raise ValueError(f"scan_interval {scan_interval!r} must be a positive number of microseconds")
        store = storage if storage is not None else get_storage(path)
        self.path = resolve_profiler_root(path, store)
        self.step_time_mapping: dict = {}
        self.system_metrics_reader = SystemMetricsReader(self.path, storage=store)
        self.framework_metrics_reader = AlgorithmMetricsReader(
            self.path, use_in_memory_cache=use_in_memory_cache, storage=store
        )
        self.system_metrics: list = []
        self.framework_metrics: list = []
        self.interval = int(scan_interval)
        self.start_time = (
            self.system_metrics_reader.get_timestamp_of_first_available_file()
            or self.framework_metrics_reader.get_timestamp_of_first_available_file()
        )

    # --- whole job --------------------------------------------------------------------------------------
    def _first_timestamp(self) -> int:
        stamps = [
            self.system_metrics_reader.get_timestamp_of_first_available_file(),
            self.framework_metrics_reader.get_timestamp_of_first_available_file(),
        ]
        return min((s for s in stamps if s), default=0)

    def get_all_system_metrics(self, selected_system_metrics: Sequence[str] = ()) -> Any:
        """Every system sample, as a data frame (``selected_system_metrics``: keep these device names)."""
        self.system_metrics_reader.refresh_event_file_list()
        start = self.system_metrics_reader.get_timestamp_of_first_available_file()
        end = self.system_metrics_reader.get_timestamp_of_latest_available_file() + self.interval
        system_df, _ = self.get_profiler_data_by_time(
            start, end, selected_system_metrics=selected_system_metrics, get_framework_metrics=False
        )
        return system_df

    def _framework_window(self) -> tuple[int, int]:
        # Trace files are named by their *last* event's end; the first file's events start before its
        # name's time. smdebug starts at the first system file and loses them; one time buffer (3 min,
        # three times smdebug's default rotation interval) before the earliest file keeps them.
        self.framework_metrics_reader.refresh_event_file_list()
        first = self._first_timestamp()
        start = max(first - TIME_BUFFER_DEFAULT, 0) if first else 0
        # and after the last file's time too: files written by other tools do not always name their end
        latest = self.framework_metrics_reader.get_timestamp_of_latest_available_file()
        return start, latest + TIME_BUFFER_DEFAULT if latest else 0

    def get_all_framework_metrics(self, selected_framework_metrics: Sequence[str] = ()) -> Any:
        """Every trace event, as a data frame (``selected_framework_metrics``: names or phases to keep)."""
        start, end = self._framework_window()
        _, framework_df = self.get_profiler_data_by_time(
            start, end, selected_framework_metrics=selected_framework_metrics, get_system_metrics=False
        )
        return framework_df

    # --- windows ----------------------------------------------------------------------------------------
    def _windows(self, start_us: int, end_us: int):
        while start_us < end_us:
            stop = min(start_us + self.interval, end_us)
            yield start_us, stop
            start_us = stop

    def get_profiler_data_by_time(
        self,
        start_time_us: int,
        end_time_us: int,
        cache_metrics: bool = False,
        selected_framework_metrics: Sequence[str] = (),
        selected_system_metrics: Sequence[str] = (),
        get_framework_metrics: bool = True,
        get_system_metrics: bool = True,
    ) -> tuple[Any, Any]:
        """(system data frame, framework data frame) of ``[start_time_us, end_time_us]`` (epoch us).

        ``cache_metrics=True`` returns every row asked for so far, this call's included (smdebug's).
        """
        pd = self.pd
        system_rows: list = []
        if get_system_metrics:
            for event in self.system_metrics_reader.get_events(start_time_us, end_time_us):
                if selected_system_metrics and event.name not in selected_system_metrics:
                    continue
                stamp_us = int(event.timestamp * CONVERT_TO_MICROSECS)
                system_rows.append(
                    [
                        us_since_epoch_to_human_readable_time(stamp_us),
                        stamp_us,
                        event.value,
                        event.name,
                        event.dimension,
                        event.node_id,
                        event.type,
                    ]
                )
            if cache_metrics:
                self.system_metrics.extend(system_rows)
                system_rows = self.system_metrics
        system_df = pd.DataFrame(system_rows, columns=SYSTEM_COLUMNS)
        system_df["timestamp_us"] = system_df["timestamp_us"] - self.start_time

        framework_rows: list = []
        if get_framework_metrics:
            self.framework_metrics_reader.refresh_event_file_list()
            for window_start, window_end in self._windows(start_time_us, end_time_us):
                for event in self.framework_metrics_reader.get_events(window_start, window_end):
                    if not _selected(event, selected_framework_metrics):
                        continue
                    framework_rows.append(
                        [
                            us_since_epoch_to_human_readable_time(event.start_time),
                            us_since_epoch_to_human_readable_time(event.end_time),
                            event.start_time,
                            event.end_time,
                            event.tid,
                            event.pid,
                            _metric_name(event),
                            _step(event),
                            _arg(event, "bytes_fetched", -1),
                            event.event_phase,
                            event.node_id,
                        ]
                    )
            if cache_metrics:
                self.framework_metrics.extend(framework_rows)
                framework_rows = self.framework_metrics
        framework_df = pd.DataFrame(framework_rows, columns=FRAMEWORK_COLUMNS)
        framework_df["start_time_us"] = framework_df["start_time_us"] - self.start_time
        framework_df["end_time_us"] = framework_df["end_time_us"] - self.start_time
        return (
            system_df[~system_df.duplicated()].reset_index(drop=True),
            framework_df[~framework_df.duplicated()].reset_index(drop=True),
        )

    def get_profiler_data_by_step(
        self, start_step: int, end_step: int, cache_metrics: bool = False
    ) -> tuple[Any, Any]:
        """(system, framework) data frames of steps ``start_step..end_step`` (both included): the trace
        events carrying those step numbers, and the system samples within their span."""
        system_df, framework_df = self.get_all_system_metrics(), self.get_all_framework_metrics()
        framework_df = framework_df[framework_df["step"].between(start_step, end_step)]
        start, end = framework_df["start_time_us"].min(), framework_df["end_time_us"].max()
        system_df = system_df[system_df["timestamp_us"].between(start, end)]
        return system_df, framework_df

    def get_framework_metrics_by_step(self, start_step: int, end_step: int) -> Any:
        """The framework data frame of steps ``start_step..end_step`` (both included)."""
        framework_df = self.get_all_framework_metrics()
        return framework_df[framework_df["step"].between(start_step, end_step)]

    # --- correlations ---------------------------------------------------------------------------------
    def convert_datetime_to_timestamp(self, timestamp: Any) -> int:
        """A ``YYYY-MM-DDTHH:MM:SS:ffffff`` text (the frames' ``timestamp`` column) in epoch us."""
        moment = self.pd.to_datetime(timestamp, format="%Y-%m-%dT%H:%M:%S:%f", utc=True)
        return convert_utc_datetime_to_microseconds(moment)

    def get_framework_metrics_by_timesteps(
        self, timestep_list: Sequence[Any] = (), selected_framework_metrics: Sequence[str] = ()
    ) -> tuple[dict, dict, dict]:
        """Time spent per phase (normalised to the largest), per event name, and per step phase, in the
        events running at each of ``timestep_list`` (texts as in the ``timestamp`` column)."""
        stamps = sorted(self.convert_datetime_to_timestamp(t) for t in timestep_list)
        results: dict[str, int] = {}
        detailed: dict[str, int] = {}
        if stamps:
            self.framework_metrics_reader.refresh_event_file_list()
            index = 0
            for window_start, window_end in self._windows(stamps[0], stamps[-1]):
                events = [
                    e
                    for e in self.framework_metrics_reader.get_events(window_start, window_end)
                    if _selected(e, selected_framework_metrics)
                ]
                while index < len(stamps) and stamps[index] < window_end:
                    stamp = stamps[index]
                    index += 1
                    for event in events:
                        if event.start_time < stamp < event.end_time:
                            spent = event.end_time - event.start_time
                            results[event.event_phase] = results.get(event.event_phase, 0) + spent
                            if "Step" not in event.event_name:
                                detailed[event.event_name] = detailed.get(event.event_name, 0) + spent
        training_phase = {k: v for k, v in results.items() if "Step" in k}
        framework = {k: v for k, v in results.items() if "Step" not in k}
        if framework:
            top = float(max(framework.values()))
            framework = {k: v / top for k, v in framework.items()}
        return framework, detailed, training_phase

    def get_framework_metrics_by_begin_and_end_timesteps(
        self,
        begin_timestep_list: Sequence[Any],
        end_timestep_list: Sequence[Any],
        selected_framework_metrics: Sequence[str] = (),
    ) -> tuple[dict, dict]:
        """Time spent per phase and per event name (each normalised to its largest) by the non-step events
        overlapping each ``[begin, end]`` interval."""
        intervals = [
            (self.convert_datetime_to_timestamp(b), self.convert_datetime_to_timestamp(e))
            for b, e in zip(begin_timestep_list, end_timestep_list, strict=True)
        ]
        phases: dict[str, int] = {}
        detailed: dict[str, int] = {}
        if intervals:
            start = min(b for b, _ in intervals)
            end = max(e for _, e in intervals)
            seen: set[tuple] = set()
            self.framework_metrics_reader.refresh_event_file_list()
            for window_start, window_end in self._windows(start, end) if end > start else [(start, end)]:
                for event in self.framework_metrics_reader.get_events(window_start, window_end):
                    key = (event.node_id, event.event_phase, event.event_name, event.start_time, event.tid)
                    if key in seen or "Step" in event.event_name:
                        continue
                    if not _selected(event, selected_framework_metrics):
                        continue
                    hits = sum(1 for b, e in intervals if event.end_time >= b and event.start_time <= e)
                    if hits:
                        seen.add(key)
                        spent = (event.end_time - event.start_time) * hits
                        phases[event.event_phase] = phases.get(event.event_phase, 0) + spent
                        detailed[event.event_name] = detailed.get(event.event_name, 0) + spent
        for table in (phases, detailed):
            if table:
                top = float(max(table.values())) or 1.0
                for key in table:
                    table[key] = table[key] / top
        return phases, detailed

    def get_all_dataloader_metrics(self, selected_framework_metrics: Sequence[str] = ()) -> Any:
        """Every trace event with the data loader's columns (worker id, workers, pinned memory)."""
        start, end = self._framework_window()
        rows: list = []
        for window_start, window_end in self._windows(start, end):
            for event in self.framework_metrics_reader.get_events(window_start, window_end):
                if selected_framework_metrics and not any(
                    s in event.event_name or s in event.event_phase for s in selected_framework_metrics
                ):
                    continue
                pin = _arg(event, "pin_memory", None)
                rows.append(
                    [
                        us_since_epoch_to_human_readable_time(event.start_time),
                        us_since_epoch_to_human_readable_time(event.end_time),
                        event.start_time,
                        event.end_time,
                        event.duration,
                        event.pid,
                        _metric_name(event),
                        _step(event),
                        _arg(event, "worker_id", -1),
                        _arg(event, "num_workers", -1),
                        "NA" if pin is None else ("True" if pin is True else "False"),
                        event.event_phase,
                        event.node_id,
                    ]
                )
        frame = self.pd.DataFrame(rows, columns=DATALOADER_COLUMNS)
        frame["start_time_us"] = frame["start_time_us"] - self.start_time
        frame["end_time_us"] = frame["end_time_us"] - self.start_time
        return frame[~frame.duplicated()].reset_index(drop=True)

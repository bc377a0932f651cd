"""Trace events as smdebug's readers return them (``TraceEvent``), and the store a reader filters them from.

Decoding is :func:`tornasole.profiler.format.trace_events.decode_trace_file`; this module only gives each
event smdebug's attributes: ``start_time``/``end_time``/``duration`` in epoch microseconds, ``event_name``,
``event_phase`` (the phase name, e.g. ``Step:ModeKeys.TRAIN``), ``event_args``, ``node_id``, ``pid``/``tid``.

Complete (``X``) events only: ``B``/``E`` pairs (Horovod's and SMDataParallel's timelines) and TensorFlow's
``trace.json.gz`` detailed profiles are not read (see docs/PROFILER.md).
"""

from __future__ import annotations

import json
import re
from datetime import datetime

from tornasole.profiler.format import trace_events as trace_format
from tornasole.profiler.readers.bounded_read import MAX_FILE_BYTES, decoding, read_profiler_file
from tornasole.profiler.readers.file_names import get_node_id_from_tracefilename
from tornasole.profiler.readers.units import (
    TimeUnits,
    convert_utc_datetime_to_microseconds,
    convert_utc_timestamp_to_microseconds,
)
from tornasole.storage import Storage

__all__ = ["TraceEvent", "TraceEventParser", "SMProfilerEvents", "display_node_id"]

_ALGO_NODE = re.compile(r"(.*)-(algo.*)")


def display_node_id(node_id: str) -> str:
    """``<pid>-algo-<n>`` becomes ``algo-<n>-<pid>`` (smdebug's order: nodes sort together)."""
    match = _ALGO_NODE.match(node_id) if node_id else None
    return f"{match.group(2)}-{match.group(1)}" if match else node_id


class TraceEvent:
    """One complete event with smdebug's attribute names (times in epoch microseconds)."""

    __slots__ = (
        "start_time",
        "event_name",
        "duration",
        "end_time",
        "phase_pid",
        "phase_tid",
        "pid",
        "tid",
        "event_args",
        "node_id",
        "phase",
        "event_phase",
        "file_type",
    )

    def __init__(
        self,
        ts: int,
        name: str,
        dur: int,
        phase_pid: int,
        phase_tid: int,
        event_args: dict | None,
        node_id: str,
        phase: str,
        file_type: str,
        event_phase: str = "",
        pid: int = 0,
        tid: int = 0,
    ) -> None:
        self.start_time = ts
        self.event_name = name
        self.duration = dur
        self.end_time = ts + dur
        self.phase_pid = phase_pid
        self.phase_tid = phase_tid
        self.pid = pid
        self.tid = tid
        self.event_args = event_args
        self.node_id = node_id
        self.phase = phase
        self.event_phase = event_phase
        self.file_type = file_type

    def __repr__(self) -> str:
        return (
            f"TraceEvent({self.event_phase!r}/{self.event_name!r} start={self.start_time} "
            f"dur={self.duration} node={self.node_id!r} args={self.event_args!r})"
        )


class TraceEventParser:
    """The trace events read so far, of one file kind (``type``), filtered by time overlap.

    Phases get a stable id per parser (the first phase seen is 1), smdebug's ``phase_pid``: events of the
    same phase from different files and nodes share it.
    """

    def __init__(self, type: str = "") -> None:  # noqa: A002 - smdebug's keyword
        self.type = type
        self._trace_events: list[TraceEvent] = []
        self._phase_ids: dict[str, int] = {}

    def read_events_from_file(
        self, tracefile: str, *, storage: Storage | None = None, max_bytes: int = MAX_FILE_BYTES
    ) -> None:
        """Add the events of one file (local path or ``s3://`` URI); a bad file raises naming it."""
        data = read_profiler_file(tracefile, storage=storage, max_bytes=max_bytes)
        self.read_events_from_bytes(data, node_id=get_node_id_from_tracefilename(tracefile), source=tracefile)

    def read_events_from_bytes(self, data: bytes | str, *, node_id: str, source: str) -> None:
        with decoding(source):
            decoded = trace_format.decode_trace_file(data, source=source)
        self._add(decoded.events, node_id)

    def read_events_from_json_data(self, trace_json_data: list, node_id: str) -> None:
        """Add the events of a file already parsed from JSON (checked as a file's events are)."""
        self.read_events_from_bytes(json.dumps(trace_json_data), node_id=node_id, source="<trace json data>")

    def _add(self, events: tuple[trace_format.TraceEvent, ...], node_id: str) -> None:
        node = display_node_id(node_id)
        for event in events:
            phase_pid = self._phase_ids.setdefault(event.phase, len(self._phase_ids) + 1)
            args = dict(event.args) if event.args else None
            pid = args["pid"] if args and isinstance(args.get("pid"), int) else phase_pid
            tid = args["thread_id"] if args and isinstance(args.get("thread_id"), int) else event.tid
            self._trace_events.append(
                TraceEvent(
                    event.start_us,
                    event.name,
                    event.duration_us,
                    phase_pid,
                    event.tid,
                    args,
                    node,
                    "X",
                    file_type=self.type,
                    event_phase=event.phase,
                    pid=pid,
                    tid=tid,
                )
            )

    def get_all_events(self) -> list[TraceEvent]:
        return self._trace_events

    def get_events_start_time_sorted(self) -> list[TraceEvent]:
        return sorted(self._trace_events, key=lambda event: event.start_time)

    def get_events_end_time_sorted(self) -> list[TraceEvent]:
        return sorted(self._trace_events, key=lambda event: event.end_time)

    def get_events_within_time_range(
        self, start_time: float, end_time: float, unit: TimeUnits = TimeUnits.MICROSECONDS
    ) -> list[TraceEvent]:
        """Events running at any moment of ``[start_time, end_time]`` (both ends inclusive)."""
        start_us = convert_utc_timestamp_to_microseconds(start_time, unit)
        end_us = convert_utc_timestamp_to_microseconds(end_time, unit)
        return [e for e in self._trace_events if not (e.end_time < start_us or end_us < e.start_time)]

    def get_events_within_range(self, start_time: datetime, end_time: datetime) -> list[TraceEvent]:
        """As :meth:`get_events_within_time_range`, with ``datetime`` bounds."""
        return self.get_events_within_time_range(
            convert_utc_datetime_to_microseconds(start_time),
            convert_utc_datetime_to_microseconds(end_time),
            unit=TimeUnits.MICROSECONDS,
        )

    def clear_events(self) -> None:
        self._trace_events = []


class SMProfilerEvents(TraceEventParser):
    """smdebug's parser of its hooks' timelines (``pythontimeline.json``, ``model_timeline.json``)."""

    def __init__(self, type: str = "PythontimelineMetrics") -> None:  # noqa: A002 - smdebug's keyword
        super().__init__(type=type)

"""System samples as smdebug's readers return them, and the in-memory store a reader filters them from."""

from __future__ import annotations

import json

from tornasole.profiler.format import system_records
from tornasole.profiler.readers.bounded_read import MAX_FILE_BYTES, decoding, read_profiler_file
from tornasole.profiler.readers.units import TimeUnits, convert_utc_timestamp_to_nanoseconds
from tornasole.storage import Storage

__all__ = ["ProfilerSystemEvent", "SystemProfilerEventParser", "ProfilerSystemEvents"]


class ProfilerSystemEvent:
    """One sample (smdebug's attribute names): ``value`` of ``dimension`` on device ``name`` at ``timestamp``.

    ``type`` is the device kind (``cpu``, ``gpu``, ``memory``...), ``name`` the device (``cpu0``, ``gpu1``;
    None when the line had none), ``timestamp`` epoch seconds.
    """

    __slots__ = ("type", "name", "dimension", "value", "node_id", "timestamp")

    def __init__(
        self, event_type: str, name: str | None, dimension: str, value: float, node_id: str, timestamp: float
    ) -> None:
        self.type = event_type
        self.name = name
        self.dimension = dimension
        self.value = value
        self.node_id = node_id
        self.timestamp = timestamp

    @classmethod
    def from_record(cls, record: system_records.SystemRecord) -> ProfilerSystemEvent:
        return cls(
            record.type, record.name or None, record.dimension, record.value, record.node_id, record.timestamp
        )

    def __repr__(self) -> str:
        return (
            f"ProfilerSystemEvent(type={self.type!r}, name={self.name!r}, dimension={self.dimension!r}, "
            f"value={self.value!r}, node_id={self.node_id!r}, timestamp={self.timestamp!r})"
        )


def _in_range(event: ProfilerSystemEvent, start_ns: int, end_ns: int, event_type: str | None) -> bool:
    if event_type is not None and event.type != event_type:
        return False
    stamp = convert_utc_timestamp_to_nanoseconds(event.timestamp, TimeUnits.SECONDS)
    return start_ns <= stamp <= end_ns


class SystemProfilerEventParser:
    """The samples read so far, filtered by time (inclusive at both ends, in nanoseconds) and device kind."""

    def __init__(self) -> None:
        self._events: list[ProfilerSystemEvent] = []

    def read_events_from_file(
        self, eventfile: str, *, storage: Storage | None = None, max_bytes: int = MAX_FILE_BYTES
    ) -> None:
        """Add every sample of one file (a local path or ``s3://`` URI); a bad line raises naming the file."""
        data = read_profiler_file(eventfile, storage=storage, max_bytes=max_bytes)
        self.read_events_from_bytes(data, source=eventfile)

    def read_events_from_bytes(self, data: bytes | str, *, source: str) -> None:
        with decoding(source):
            records = system_records.decode_records(data, source=source)
        self._events.extend(ProfilerSystemEvent.from_record(record) for record in records)

    def read_events_from_json_data(self, system_profiler_json_data: list[dict]) -> None:
        """Add samples already parsed from JSON (one dict per line), validated as a file's lines are."""
        for event in system_profiler_json_data:
            self.read_event_from_dict(event)

    def read_event_from_dict(self, event: dict) -> None:
        self.read_events_from_bytes(json.dumps(event), source="<system metric dict>")

    def get_events_within_time_range(
        self,
        start_time: float,
        end_time: float,
        unit: TimeUnits = TimeUnits.MICROSECONDS,
        event_type: str | None = None,
    ) -> list[ProfilerSystemEvent]:
        start_ns = convert_utc_timestamp_to_nanoseconds(start_time, unit)
        end_ns = convert_utc_timestamp_to_nanoseconds(end_time, unit)
        return [event for event in self._events if _in_range(event, start_ns, end_ns, event_type)]

    def get_all_events(self) -> list[ProfilerSystemEvent]:
        return self._events

    def clear_events(self) -> None:
        self._events = []


class ProfilerSystemEvents(SystemProfilerEventParser):
    """smdebug's name for the system-sample store."""

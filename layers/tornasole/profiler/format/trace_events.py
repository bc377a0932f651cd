"""Framework events: a Chrome trace-event JSON array per file, as smdebug's timeline writer writes it.

A file starts with a metadata event that fixes the time origin, then, for each training phase, a
``process_name`` event giving the phase a pid; every complete (``"ph": "X"``) event after that carries the
phase's pid, a ``ts`` relative to the origin and a ``dur``, both in microseconds::

    [
    {"name": "process_name", "ph": "M", "pid": 0,
     "args": {"start_time_since_epoch_in_micros": 1590461107892211}},
    {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "Step:ModeKeys.TRAIN"}},
    {"name": "Step:ModeKeys.TRAIN", "ph": "X", "pid": 1, "tid": 0, "ts": 1200, "dur": 5310,
     "args": {"step_num": "0"}}
    ]

Chrome's ``about:tracing`` and Perfetto open these files as they are. smdebug's readers (and
:func:`decode_trace_file`) put ``ts`` back on the epoch and name each event's phase by its pid.

Phase names the hooks write, which the profiler rules and smdebug's notebooks look for: a step is
``Step:ModeKeys.<MODE>`` (:func:`step_phase`) with ``args.step_num``; :data:`DATALOADER`, :data:`FORWARD`,
:data:`BACKWARD` and :data:`OPTIMIZER` are the phases inside a step.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tornasole.exceptions import FormatError

__all__ = [
    "DATALOADER",
    "FORWARD",
    "BACKWARD",
    "OPTIMIZER",
    "STEP_PREFIX",
    "step_phase",
    "TraceEvent",
    "TraceFile",
    "encode_trace_file",
    "decode_trace_file",
    "TraceFileEncoder",
]

STEP_PREFIX = "Step:ModeKeys."
DATALOADER = "DataLoaderIter"
FORWARD = "Forward"
BACKWARD = "Backward(post-forward)"
OPTIMIZER = "Optimizer"

_MAX_TEXT = 256


def step_phase(mode_name: str) -> str:
    """``Step:ModeKeys.TRAIN`` for ``"TRAIN"``: the phase (and event name) of one whole step."""
    return STEP_PREFIX + mode_name


@dataclass(frozen=True)
class TraceEvent:
    """One complete event: ``name`` in ``phase`` from ``start_us`` (epoch) for ``duration_us``."""

    phase: str
    name: str
    start_us: int
    duration_us: int
    tid: int = 0
    args: Mapping[str, object] = field(default_factory=dict)

    @property
    def end_us(self) -> int:
        return self.start_us + self.duration_us


@dataclass(frozen=True)
class TraceFile:
    """A decoded file: its time origin (epoch us) and its complete events, in file order."""

    start_time_us: int
    events: tuple[TraceEvent, ...]

    @property
    def end_us(self) -> int:
        """The last event's end: what the file's name carries."""
        return max((event.end_us for event in self.events), default=self.start_time_us)


def encode_trace_file(start_time_us: int, events: Iterable[TraceEvent]) -> str:
    """The whole file's text. Event times must not precede ``start_time_us``."""
    origin = int(start_time_us)
    lines = [
        _dumps(
            {
                "name": "process_name",
                "ph": "M",
                "pid": 0,
                "args": {"start_time_since_epoch_in_micros": origin},
            }
        )
    ]
    lines.append(_dumps({"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}}))
    pids: dict[str, int] = {}
    for event in events:
        _check(event, where=f"trace event {event.name!r}")
        if event.start_us < origin:
            raise FormatError(
                f"trace event {event.name!r} starts at {event.start_us}, before the file's origin {origin}"
            )
        pid = pids.get(event.phase)
        if pid is None:
            pid = pids[event.phase] = len(pids) + 1
            lines.append(
                _dumps({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": event.phase}})
            )
            lines.append(
                _dumps({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}})
            )
        body: dict[str, object] = {
            "name": event.name,
            "ph": "X",
            "pid": pid,
            "tid": event.tid,
            "ts": event.start_us - origin,
            "dur": event.duration_us,
        }
        if event.args:
            body["args"] = dict(event.args)
        lines.append(_dumps(body))
    return "[\n" + ",\n".join(lines) + "\n]"


class TraceFileEncoder:
    """:func:`encode_trace_file`'s text built one event at a time, for a writer that encodes as events
    arrive (a profiler thread that must not hold the GIL for a whole file at once).

    The origin is fixed up front (a writer knows when it started); :meth:`text` equals
    ``encode_trace_file(origin, events)`` for the same events whose ``args`` hold at most ``step_num``.
    Each event costs one f-string: names are JSON-escaped once per distinct name.
    """

    __slots__ = ("origin", "_lines", "_pids", "_quoted", "size")

    def __init__(self, start_time_us: int) -> None:
        self.origin = int(start_time_us)
        self._lines = [
            _dumps(
                {
                    "name": "process_name",
                    "ph": "M",
                    "pid": 0,
                    "args": {"start_time_since_epoch_in_micros": self.origin},
                }
            ),
            _dumps({"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}}),
        ]
        self._pids: dict[str, int] = {}
        self._quoted: dict[str, str] = {}
        self.size = sum(len(line) + 2 for line in self._lines)

    def __len__(self) -> int:
        """Complete events added so far."""
        return len(self._lines) - 2 - 2 * len(self._pids)

    def add(
        self,
        phase: str,
        name: str,
        start_us: int,
        duration_us: int,
        tid: int = 0,
        step_num: int | None = None,
    ) -> None:
        """Append one complete event; the same checks as :func:`encode_trace_file`."""
        if start_us < self.origin:
            raise FormatError(
                f"trace event {name!r} starts at {start_us}, before the file's origin {self.origin}"
            )
        if duration_us < 0:
            raise FormatError(f"trace event {name!r}: duration {duration_us} is negative")
        lines = self._lines
        pid = self._pids.get(phase)
        if pid is None:
            self._quote(phase)
            pid = self._pids[phase] = len(self._pids) + 1
            for line in (
                _dumps({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": phase}}),
                _dumps({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}}),
            ):
                lines.append(line)
                self.size += len(line) + 2
        quoted = self._quoted.get(name) or self._quote(name)
        args = "" if step_num is None else f', "args": {{"step_num": "{int(step_num)}"}}'
        line = (
            f'{{"name": {quoted}, "ph": "X", "pid": {pid}, "tid": {int(tid)}, '
            f'"ts": {int(start_us) - self.origin}, "dur": {int(duration_us)}{args}}}'
        )
        lines.append(line)
        self.size += len(line) + 2

    def _quote(self, text: str) -> str:
        if not isinstance(text, str) or len(text) > _MAX_TEXT:
            raise FormatError(f"trace event name/phase must be a string of at most {_MAX_TEXT} characters")
        quoted = self._quoted[text] = json.dumps(text)
        return quoted

    def text(self) -> str:
        return "[\n" + ",\n".join(self._lines) + "\n]"


def decode_trace_file(text: str | bytes, *, source: str = "<trace file>") -> TraceFile:
    """The origin and complete events of a file's text; :class:`FormatError` naming ``source`` if bad.

    Events other than ``X`` and ``M`` (instant events, counters) are skipped, as smdebug's parser does.
    """
    try:
        body = json.loads(text)
    except (ValueError, UnicodeDecodeError) as error:
        raise FormatError(f"{source}: not a JSON trace file ({error})") from None
    if isinstance(body, dict) and isinstance(body.get("traceEvents"), list):
        body = body["traceEvents"]  # the object form Chrome also accepts
    if not isinstance(body, list):
        raise FormatError(f"{source}: a trace file must hold a JSON array of events")
    origin = 0
    names: dict[object, str] = {}
    events: list[TraceEvent] = []
    for number, raw in enumerate(body):
        where = f"{source} event {number}"
        if not isinstance(raw, dict) or "ph" not in raw:
            continue
        args = raw.get("args") if isinstance(raw.get("args"), dict) else {}
        if raw["ph"] == "M":
            if raw.get("name") == "process_name":
                if "start_time_since_epoch_in_micros" in args:
                    origin = _integer(
                        args["start_time_since_epoch_in_micros"], where, "start_time_since_epoch_in_micros"
                    )
                if isinstance(args.get("name"), str):
                    names[raw.get("pid")] = args["name"]
            continue
        if raw["ph"] != "X":
            continue
        if not isinstance(raw.get("name"), str):
            raise FormatError(f"{where}: 'name' must be a string")
        event = TraceEvent(
            phase=names.get(raw.get("pid"), "Unknown"),
            name=raw["name"],
            start_us=origin + _integer(raw.get("ts"), where, "ts"),
            duration_us=_integer(raw.get("dur", 0), where, "dur"),
            tid=raw["tid"] if isinstance(raw.get("tid"), int) and not isinstance(raw.get("tid"), bool) else 0,
            args=args,
        )
        _check(event, where=where)
        events.append(event)
    return TraceFile(start_time_us=origin, events=tuple(events))


def _integer(value: object, where: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FormatError(f"{where}: {key!r} must be a number of microseconds, got {value!r}")
    return int(value)


def _check(event: TraceEvent, *, where: str) -> None:
    for key in ("phase", "name"):
        text = getattr(event, key)
        if not isinstance(text, str) or len(text) > _MAX_TEXT:
            raise FormatError(f"{where}: {key} must be a string of at most {_MAX_TEXT} characters")
    if event.duration_us < 0:
        raise FormatError(f"{where}: duration {event.duration_us} is negative")


def _dumps(body: dict[str, object]) -> str:
    return json.dumps(body, separators=(", ", ": "), allow_nan=False)

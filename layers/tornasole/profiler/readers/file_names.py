"""The names smdebug's readers parse: which files hold system samples or trace events, their node and time.

:mod:`tornasole.profiler.format.paths` is the definition of the names Tornasole writes. Readers also meet
names SageMaker and older smdebug releases wrote (``1589930988000000_4487_0000_pythontimeline.json``: a
node id followed by more ``_`` fields), which smdebug reads by splitting on ``_``; these helpers accept
both, so a trace file SageMaker wrote is never silently skipped.
"""

from __future__ import annotations

import re

from tornasole.profiler.format import paths

__all__ = [
    "TraceFileName",
    "parse_trace_file_name",
    "is_valid_tracefilename",
    "get_timestamp_from_tracefilename",
    "get_node_id_from_tracefilename",
    "validate_system_profiler_file",
    "get_utctimestamp_us_since_epoch_from_system_profiler_file",
    "get_node_id_from_system_profiler_filename",
]

# smdebug's own test of a system file name: a folder named system above it, ten digits, algo-<n>.
_SYSTEM_FILE = re.compile(r".+/system/.+/(\d{10})\.(algo-\d+)\.json$")
_TRACE_TIME = re.compile(r"[0-9]{1,19}")


class TraceFileName:
    """A trace file's end time (epoch us), node id and kind (one of ``paths.TIMELINE_SUFFIXES``)."""

    __slots__ = ("end_time_us", "node_id", "suffix")

    def __init__(self, end_time_us: int, node_id: str, suffix: str) -> None:
        self.end_time_us = end_time_us
        self.node_id = node_id
        self.suffix = suffix


def parse_trace_file_name(path: str) -> TraceFileName | None:
    """The parts of a ``framework/pevents`` trace file's name, or None if it is not one."""
    parsed = paths.parse_framework_file_name(path)
    if parsed is not None:
        return TraceFileName(parsed.end_time_us, parsed.node_id, parsed.suffix)
    if "pevents/" not in path:
        return None
    name = path.rsplit("/", 1)[-1]
    suffix = next((s for s in paths.TIMELINE_SUFFIXES if name.endswith("_" + s)), None)
    fields = name.split("_")
    if suffix is None or len(fields) < 3 or not _TRACE_TIME.fullmatch(fields[0]) or not fields[1]:
        return None
    return TraceFileName(int(fields[0]), fields[1], suffix)


def is_valid_tracefilename(filename: str) -> bool:
    """Whether ``filename`` names a trace file of the ``pevents`` layout."""
    return parse_trace_file_name(filename) is not None


def get_timestamp_from_tracefilename(filename: str) -> int:
    """The end time (epoch us) a trace file's name carries; 0 for any other name (as smdebug)."""
    parsed = parse_trace_file_name(filename)
    return parsed.end_time_us if parsed is not None else 0


def get_node_id_from_tracefilename(filename: str) -> str:
    """The node id a trace file's name carries; ``""`` for any other name (as smdebug)."""
    parsed = parse_trace_file_name(filename)
    return parsed.node_id if parsed is not None else ""


def validate_system_profiler_file(filename: str) -> bool:
    """Whether ``filename`` names a system-metrics file (``.../system/.../<10 digits>.algo-<n>.json``)."""
    return _SYSTEM_FILE.match(filename) is not None


def get_utctimestamp_us_since_epoch_from_system_profiler_file(filename: str) -> int | None:
    """The start time, in epoch microseconds, a system file's name carries; None for any other name."""
    match = _SYSTEM_FILE.match(filename)
    return int(match.group(1)) * 1_000_000 if match else None


def get_node_id_from_system_profiler_filename(filename: str) -> str | None:
    """The node (``algo-<n>``) a system file's name carries; None for any other name."""
    match = _SYSTEM_FILE.match(filename)
    return match.group(2) if match else None

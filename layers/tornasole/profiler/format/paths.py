"""Where profiler files live, relative to the profiler root (``<trial>/profiler-output``).

SageMaker's layout, which smdebug's readers list and parse by name:

- system metrics: ``system/incremental/<YYYYMMDDHH>/<epoch seconds, 10 digits>.<node>.json``, where the
  node is ``algo-<n>`` (smdebug checks ``.+/system/.+/(\\d{10}).algo-\\d+.json``);
- framework events: ``framework/pevents/<YYYYMMDDHH>/<end time, epoch us>_<node id>_<suffix>``, where the
  end time is that of the file's last event (readers pick files by it) and the node id has no ``_``
  (readers split the name on ``_``), e.g. ``1590461127873222_1234-myhost_pythontimeline.json``.

The hour folder keeps one listing small and lets an S3 reader start after a prefix.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from tornasole.exceptions import FormatError
from tornasole.stack_spec import END_MARKER_FILE

__all__ = [
    "PROFILER_DIR",
    "SYSTEM_PREFIX",
    "FRAMEWORK_PREFIX",
    "PYTHON_TIMELINE_SUFFIX",
    "MODEL_TIMELINE_SUFFIX",
    "TIMELINE_SUFFIXES",
    "SystemFileName",
    "FrameworkFileName",
    "profiler_root",
    "hour_folder",
    "framework_node_id",
    "system_file_name",
    "framework_file_name",
    "parse_system_file_name",
    "parse_framework_file_name",
    "profiler_file_kind",
    "END_MARKER",
    "end_marker_paths",
]

#: The profiler root's name under a trial (SageMaker: ``<job>/profiler-output``).
PROFILER_DIR = "profiler-output"
SYSTEM_PREFIX = "system/incremental"
FRAMEWORK_PREFIX = "framework/pevents"
PYTHON_TIMELINE_SUFFIX = "pythontimeline.json"
MODEL_TIMELINE_SUFFIX = "model_timeline.json"
#: The trace-file kinds smdebug's framework readers accept.
TIMELINE_SUFFIXES = (
    PYTHON_TIMELINE_SUFFIX,
    MODEL_TIMELINE_SUFFIX,
    "horovod_timeline.json",
    "smdataparallel_timeline.json",
)

_HOUR_FORMAT = "%Y%m%d%H"
_SYSTEM_NODE = re.compile(r"algo-[0-9]{1,6}")
_SYSTEM_NAME = re.compile(r"(?:^|/)([0-9]{10})\.(algo-[0-9]{1,6})\.json$")
_FRAMEWORK_NAME = re.compile(r"(?:^|/)([0-9]{1,19})_([A-Za-z0-9.\-]{1,255})_([A-Za-z0-9_.\-]{1,64}\.json)$")
_NODE_UNSAFE = re.compile(r"[^A-Za-z0-9.\-]")


@dataclass(frozen=True)
class SystemFileName:
    """A parsed system-metrics file name: when the file started (epoch seconds) and its node."""

    timestamp_s: int
    node: str


@dataclass(frozen=True)
class FrameworkFileName:
    """A parsed trace file name: its last event's end (epoch microseconds), node id and kind."""

    end_time_us: int
    node_id: str
    suffix: str


def profiler_root(trial_path: str) -> str:
    """``<trial>/profiler-output`` for a local path or an ``s3://`` URI."""
    return trial_path.rstrip("/") + "/" + PROFILER_DIR


def hour_folder(epoch_seconds: float) -> str:
    """The UTC ``YYYYMMDDHH`` folder a file starting at ``epoch_seconds`` goes in."""
    return time.strftime(_HOUR_FORMAT, time.gmtime(epoch_seconds))


def framework_node_id(rank: int | str, host: str) -> str:
    """smdebug's node id ``<rank or pid>-<host>``, with every character a reader would split on replaced."""
    return _NODE_UNSAFE.sub("-", f"{rank}-{host}")[:255]


def system_file_name(timestamp_s: float, node: str = "algo-1") -> str:
    """``system/incremental/<hour>/<ts>.<node>.json`` for a file whose first sample is at ``timestamp_s``."""
    if not _SYSTEM_NODE.fullmatch(node):
        raise FormatError(
            f"system-metrics node {node!r} must look like 'algo-<n>' (smdebug's readers need it)"
        )
    seconds = int(timestamp_s)
    if not 10**9 <= seconds < 10**10:
        raise FormatError(f"system-metrics file time {timestamp_s!r} is not an epoch time in seconds")
    return f"{SYSTEM_PREFIX}/{hour_folder(seconds)}/{seconds}.{node}.json"


def framework_file_name(end_time_us: int, node_id: str, suffix: str = PYTHON_TIMELINE_SUFFIX) -> str:
    """``framework/pevents/<hour>/<end us>_<node id>_<suffix>`` for a trace file ending at ``end_time_us``."""
    if suffix not in TIMELINE_SUFFIXES:
        raise FormatError(f"trace file suffix {suffix!r} is not one of {', '.join(TIMELINE_SUFFIXES)}")
    if not node_id or _NODE_UNSAFE.search(node_id):
        raise FormatError(f"trace node id {node_id!r} may hold only letters, digits, '.' and '-'")
    end = int(end_time_us)
    if end < 0:
        raise FormatError(f"trace file end time {end_time_us!r} is negative")
    return f"{FRAMEWORK_PREFIX}/{hour_folder(end / 1e6)}/{end}_{node_id}_{suffix}"


def parse_system_file_name(key: str) -> SystemFileName | None:
    """The time and node of a system-metrics file (a key or path ending in its name), or None."""
    match = _SYSTEM_NAME.search(key)
    if match is None or "/system/" not in "/" + key:
        return None
    return SystemFileName(timestamp_s=int(match.group(1)), node=match.group(2))


def parse_framework_file_name(key: str) -> FrameworkFileName | None:
    """The end time, node id and kind of a trace file (a key or path ending in its name), or None."""
    match = _FRAMEWORK_NAME.search(key)
    if match is None or "pevents/" not in key or match.group(3) not in TIMELINE_SUFFIXES:
        return None
    return FrameworkFileName(end_time_us=int(match.group(1)), node_id=match.group(2), suffix=match.group(3))


def profiler_file_kind(key: str) -> str | None:
    """``"system"``, ``"framework"`` or None for any key: how the evaluator routes a new object."""
    if f"{PROFILER_DIR}/" not in key and not key.startswith(("system/", "framework/")):
        return None
    if parse_system_file_name(key) is not None:
        return "system"
    if parse_framework_file_name(key) is not None:
        return "framework"
    return None


#: The file whose presence says training has ended (the trial's end marker, smdebug's name for it).
END_MARKER = END_MARKER_FILE


def end_marker_paths(profiler_root_path: str) -> tuple[str, ...]:
    """Where an end marker says a job with this profiler root has ended, most likely first.

    The trial's own marker (``<trial>/training_job_end.ts``, what Tornasole's hooks write), then the
    ones SageMaker's profiler leaves in ``system/`` and ``framework/`` (what smdebug's ProfilerTrial checks).
    """
    root = profiler_root_path.rstrip("/")
    found = []
    if root.endswith("/" + PROFILER_DIR):
        found.append(root[: -len(PROFILER_DIR)] + END_MARKER)
    found += [f"{root}/system/{END_MARKER}", f"{root}/framework/{END_MARKER}"]
    return tuple(found)

"""What the report shows of ``<trial>/profiler-output/``: utilisation series, step times, phase totals.

The one module of the report that opens profiler files, through :mod:`tornasole.storage` and
:mod:`tornasole.profiler.format` only, so the profiler's readers (``tornasole.profiler.readers``) can
replace the two read functions here without touching the rendering. What it returns is plain data,
already bounded: at most ``MAX_FILES`` files of each kind are read (the newest are left out, and the
report says so), and a file that does not decode is named in ``problems`` instead of failing the report.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from tornasole.exceptions import FormatError
from tornasole.profiler.format import paths, system_records, trace_events
from tornasole.storage import ReadRequest, get_storage

__all__ = ["MAX_FILES", "PHASES", "ProfilerData", "StepTime", "load_profiler_data"]

log = logging.getLogger(__name__)

#: Files of each kind (system, framework) read at most: a day of 60-second files is 1,440 per node.
MAX_FILES = 5000
#: The phases inside a step, as the hooks name them, with the words the report uses.
PHASES = (
    (trace_events.DATALOADER, "data loader"),
    (trace_events.FORWARD, "forward"),
    (trace_events.BACKWARD, "backward"),
    (trace_events.OPTIMIZER, "optimizer"),
)
_MAX_PROBLEMS = 20


@dataclass(frozen=True)
class StepTime:
    """One step of one node: its number, mode, start (epoch s) and duration (ms)."""

    step: int
    mode: str
    node: str
    start_s: float
    duration_ms: float


@dataclass
class ProfilerData:
    """The profiler's files, reduced to what the report draws."""

    root: str
    #: "CPU total (algo-1)" -> [(epoch s, percent)], one series per node and dimension drawn
    utilisation: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    steps: list[StepTime] = field(default_factory=list)
    #: report phase word -> total milliseconds over every step
    phase_ms: dict[str, float] = field(default_factory=dict)
    system_files: int = 0
    framework_files: int = 0
    files_left_out: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.utilisation or self.steps or self.phase_ms)


def _series_label(record: system_records.SystemRecord) -> str | None:
    """The utilisation series a record belongs to (per node), or None for one the report does not draw
    (per-core CPU lines would be one series per core: the machine total says it)."""
    node = record.node_id or "node"
    dim, name = record.dimension, record.name
    if dim == system_records.CPU_UTILIZATION and name == system_records.CPU_TOTAL:
        return f"CPU total ({node})"
    if dim == system_records.MEMORY_USED_PERCENT:
        return f"memory used ({node})"
    if dim == system_records.GPU_UTILIZATION:
        return f"{name or 'gpu'} utilisation ({node})"
    if dim == system_records.GPU_MEMORY_UTILIZATION:
        return f"{name or 'gpu'} memory ({node})"
    if dim == system_records.IO_WAIT:
        return f"I/O wait ({node})"
    return None


def _list(root: str, prefix: str, parse: Callable[[str], object]) -> tuple[list[str], int]:
    storage = get_storage(root)
    found = [p for p in storage.list(f"{root}/{prefix}/") if parse(p) is not None]
    left_out = max(0, len(found) - MAX_FILES)
    return found[:MAX_FILES], left_out


def _read_all(root: str, files: list[str]) -> list[bytes | BaseException]:
    if not files:
        return []
    return get_storage(root).read_many([ReadRequest(p) for p in files], on_error="return")


def read_system(data: ProfilerData) -> None:
    """Fill ``data.utilisation`` from the system-metric files (one series per node and dimension)."""
    files, left = _list(data.root, paths.SYSTEM_PREFIX, paths.parse_system_file_name)
    data.system_files, data.files_left_out = len(files), data.files_left_out + left
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for path, body in zip(files, _read_all(data.root, files)):
        try:
            if isinstance(body, BaseException):
                raise FormatError(f"{path}: {body}")
            records = system_records.decode_records(body, source=path)
        except FormatError as exc:
            _problem(data, str(exc))
            continue
        for record in records:
            label = _series_label(record)
            if label is not None:
                series[label].append((record.timestamp, record.value))
    data.utilisation = {k: sorted(v) for k, v in sorted(series.items())}


def read_framework(data: ProfilerData) -> None:
    """Fill ``data.steps`` and ``data.phase_ms`` from the trace-event files."""
    files, left = _list(data.root, paths.FRAMEWORK_PREFIX, paths.parse_framework_file_name)
    data.framework_files, data.files_left_out = len(files), data.files_left_out + left
    phase_words = dict(PHASES)
    totals: dict[str, float] = {word: 0.0 for _, word in PHASES}
    for path, body in zip(files, _read_all(data.root, files)):
        parsed = paths.parse_framework_file_name(path)
        node = parsed.node_id if parsed is not None else "node"
        try:
            if isinstance(body, BaseException):
                raise FormatError(f"{path}: {body}")
            trace = trace_events.decode_trace_file(body, source=path)
        except FormatError as exc:
            _problem(data, str(exc))
            continue
        for event in trace.events:
            if event.phase.startswith(trace_events.STEP_PREFIX):
                try:
                    step = int(str(event.args.get("step_num", "")))
                except ValueError:
                    _problem(data, f"{path}: step event at {event.start_us} us has no integer step_num")
                    continue
                mode = event.phase[len(trace_events.STEP_PREFIX) :]
                data.steps.append(StepTime(step, mode, node, event.start_us / 1e6, event.duration_us / 1e3))
            elif event.phase in phase_words:
                totals[phase_words[event.phase]] += event.duration_us / 1e3
    data.steps.sort(key=lambda s: (s.start_s, s.step))
    data.phase_ms = {k: v for k, v in totals.items() if v > 0}


def _problem(data: ProfilerData, text: str) -> None:
    log.warning("profiler file not read: %s", text)
    if len(data.problems) < _MAX_PROBLEMS:
        data.problems.append(text[:300])


def profiler_present(trial_path: str) -> bool:
    """Whether the trial has a ``profiler-output/`` with at least one object in it."""
    root = paths.profiler_root(trial_path)
    return next(iter(get_storage(root).list(root + "/")), None) is not None


def load_profiler_data(trial_path: str) -> ProfilerData | None:
    """The profiler data of ``trial_path``, or None when it has no ``profiler-output/``."""
    if not profiler_present(trial_path):
        return None
    data = ProfilerData(root=paths.profiler_root(trial_path))
    read_system(data)
    read_framework(data)
    return data

"""What the report shows of ``<trial>/profiler-output/``: utilisation series, step times, phase totals.

Files are listed, read and decoded by the profiler's readers (:mod:`tornasole.profiler.readers`), the
same path as smdebug's reader API and the profiler rules take: one set of file-name rules, one size cap
per file (``max_file_bytes``) and one wording of errors. What this module returns is plain data, already
bounded: at most ``MAX_FILES`` files of each kind are read (the newest are left out, and the report says
so), and a file that cannot be read or decoded is named in ``problems`` instead of failing the report.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field

from tornasole.profiler.format import paths, system_records, trace_events
from tornasole.profiler.readers import (
    MAX_FILE_BYTES,
    AlgorithmMetricsReader,
    MetricsReaderBase,
    ProfilerSystemEvent,
    SystemMetricsReader,
)
from tornasole.storage import get_storage

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


def _series_label(record: ProfilerSystemEvent) -> str | None:
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


def _read_listed(reader: MetricsReaderBase, data: ProfilerData) -> tuple[int, list]:
    """Read the oldest ``MAX_FILES`` files ``reader`` listed (the rest are counted in
    ``data.files_left_out``); a file it cannot read or decode is a problem of ``data``, not an error.
    Returns how many files were read and their events."""
    files = reader.listed_files()
    data.files_left_out += max(0, len(files) - MAX_FILES)
    files = files[:MAX_FILES]
    reader.parse_event_files(files, on_error=lambda _path, exc: _problem(data, str(exc)))
    return len(files), [
        event for parser in reader.get_all_event_parsers() for event in parser.get_all_events()
    ]


def read_system(data: ProfilerData, reader: SystemMetricsReader) -> None:
    """Fill ``data.utilisation`` from the system-metric files (one series per node and dimension)."""
    data.system_files, samples = _read_listed(reader, data)
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for sample in samples:
        label = _series_label(sample)
        if label is not None:
            series[label].append((sample.timestamp, sample.value))
    data.utilisation = {k: sorted(v) for k, v in sorted(series.items())}


def read_framework(data: ProfilerData, reader: AlgorithmMetricsReader) -> None:
    """Fill ``data.steps`` and ``data.phase_ms`` from the trace-event files."""
    data.framework_files, events = _read_listed(reader, data)
    phase_words = dict(PHASES)
    totals: dict[str, float] = {word: 0.0 for _, word in PHASES}
    for event in events:
        if event.event_phase.startswith(trace_events.STEP_PREFIX):
            try:
                step = int(str((event.event_args or {}).get("step_num", "")))
            except ValueError:
                where = f"trace events of node {event.node_id}: step event at {event.start_time} us"
                _problem(data, f"{where} has no integer step_num")
                continue
            mode = event.event_phase[len(trace_events.STEP_PREFIX) :]
            data.steps.append(
                StepTime(step, mode, event.node_id, event.start_time / 1e6, event.duration / 1e3)
            )
        elif event.event_phase in phase_words:
            totals[phase_words[event.event_phase]] += event.duration / 1e3
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


def load_profiler_data(trial_path: str, *, max_file_bytes: int = MAX_FILE_BYTES) -> ProfilerData | None:
    """The profiler data of ``trial_path``, or None when it has no ``profiler-output/``.

    ``max_file_bytes``: a file larger than this is not read (a problem naming it); the readers' cap.
    """
    if not profiler_present(trial_path):
        return None
    data = ProfilerData(root=paths.profiler_root(trial_path))
    storage = get_storage(data.root)
    read_system(data, SystemMetricsReader(data.root, storage=storage, max_file_bytes=max_file_bytes))
    read_framework(data, AlgorithmMetricsReader(data.root, storage=storage, max_file_bytes=max_file_bytes))
    return data

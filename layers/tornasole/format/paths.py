"""File names inside a trial directory (FORMAT.md 1 and 6), relative to the trial.

All names here are relative keys joined with ``/`` (``index/000000000/...``); the
storage layer joins them onto a local path or an S3 prefix. Steps are 12-digit
zero-padded decimals; index files are bucketed by ``step // 1000`` (9 digits) so
a listing of one bucket stays small, event files are not.

Worker names. A TF MirroredStrategy device name (``/job:worker/replica:0/...``)
cannot be used in a file name: smdebug writes it with ``/`` -> ``_`` and ``:`` ->
``-`` (so the file name has ``__`` after the step) and reverses that on read when
the serialized name starts with ``_``. :func:`serialize_worker` and
:func:`deserialize_worker` do the same; the name builders below serialize, and
the parsers deserialize, so callers always handle the real worker name.
"""

from __future__ import annotations

import re

__all__ = [
    "END_MARKER",
    "STOP_SIGNAL",
    "JOB_CONFIG",
    "EVENTS_DIR",
    "INDEX_DIR",
    "COLLECTIONS_DIR",
    "step_str",
    "serialize_worker",
    "deserialize_worker",
    "event_dir_name",
    "event_file_name",
    "index_file_name",
    "index_prefix_for_step",
    "collections_file_name",
    "parse_index_file_name",
    "parse_event_file_name",
    "parse_collections_file_name",
]

#: Empty object at the trial root written when training ends.
END_MARKER = "training_job_end.ts"
#: Object at the trial root that asks the training job to stop.
STOP_SIGNAL = "tornasole_stop_training.json"
#: The job configuration object at the trial root.
JOB_CONFIG = "tornasole_job.json"
EVENTS_DIR = "events"
INDEX_DIR = "index"
COLLECTIONS_DIR = "collections/000000000"

_STEP_FILE = re.compile(r"(?:^|/)(\d+)_([^/]+)\.(json|csv|tfevents)$")
_COLLECTIONS_FILE = re.compile(r"(?:^|/)collections/[^/]+/([^/]+)_collections\.(json|ts)$")


def step_str(step: int) -> str:
    """The 12-digit step used in file and directory names.

    Examples
    --------
    >>> step_str(5)
    '000000000005'
    """
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    return format(step, "012")


def serialize_worker(worker: str) -> str:
    """A worker name as it appears in file names (TF device names are escaped).

    Examples
    --------
    >>> serialize_worker("/job:worker/replica:0/task:1/device:GPU:0")
    '_job-worker_replica-0_task-1_device-GPU-0'
    >>> serialize_worker("worker_0")
    'worker_0'
    """
    if worker.startswith("/"):
        return worker.replace("/", "_").replace(":", "-")
    return worker


def deserialize_worker(name: str) -> str:
    """Reverse :func:`serialize_worker` (names starting with ``_`` are TF device names).

    Examples
    --------
    >>> deserialize_worker("_job-worker_replica-0_task-1_device-GPU-0")
    '/job:worker/replica:0/task:1/device:GPU:0'
    """
    if name.startswith("_"):
        return name.replace("_", "/").replace("-", ":")
    return name


def event_dir_name(step: int) -> str:
    """``events/<STEP12>``: the directory of a step's event files (one per worker).

    Examples
    --------
    >>> event_dir_name(5)
    'events/000000000005'
    """
    return f"{EVENTS_DIR}/{step_str(step)}"


def event_file_name(step: int, worker: str) -> str:
    """``events/<STEP12>/<STEP12>_<worker>.tfevents``.

    Examples
    --------
    >>> event_file_name(5, "worker_0")
    'events/000000000005/000000000005_worker_0.tfevents'
    """
    s = step_str(step)
    return f"{EVENTS_DIR}/{s}/{s}_{serialize_worker(worker)}.tfevents"


def index_prefix_for_step(step: int) -> str:
    """The index bucket holding ``step``, with a trailing slash.

    Examples
    --------
    >>> index_prefix_for_step(1234)
    'index/000000001/'
    """
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    return f"{INDEX_DIR}/{format(step // 1000, '09')}/"


def index_file_name(step: int, worker: str) -> str:
    """``index/<step // 1000, 9 digits>/<STEP12>_<worker>.json``.

    Examples
    --------
    >>> index_file_name(5, "worker_0")
    'index/000000000/000000000005_worker_0.json'
    """
    return f"{index_prefix_for_step(step)}{step_str(step)}_{serialize_worker(worker)}.json"


def collections_file_name(worker: str) -> str:
    """``collections/000000000/<worker>_collections.json``.

    Examples
    --------
    >>> collections_file_name("worker_1")
    'collections/000000000/worker_1_collections.json'
    """
    return f"{COLLECTIONS_DIR}/{serialize_worker(worker)}_collections.json"


def _parse_step_file(key: str, suffixes: tuple[str, ...], folder: str) -> tuple[int, str] | None:
    m = _STEP_FILE.search(key)
    if m is None or m.group(3) not in suffixes:
        return None
    parts = key.split("/")
    if len(parts) < 3 or parts[-3] != folder:
        return None
    return int(m.group(1)), deserialize_worker(m.group(2))


def parse_index_file_name(key: str) -> tuple[int, str] | None:
    """``(step, worker)`` from an index key or full path, else ``None``.

    Accepts ``.json`` and the legacy ``.csv`` suffix; the file must sit in
    ``index/<bucket>/``.

    Examples
    --------
    >>> parse_index_file_name("s3://b/run/index/000000001/000000001234_worker_0.json")
    (1234, 'worker_0')
    >>> parse_index_file_name("run/index/000000000/000000000005__replica-0_task-0_device-GPU-0.json")
    (5, '/replica:0/task:0/device:GPU:0')
    >>> parse_index_file_name("run/index/000000000/notes.txt") is None
    True
    """
    return _parse_step_file(key, ("json", "csv"), INDEX_DIR)


def parse_event_file_name(key: str) -> tuple[int, str] | None:
    """``(step, worker)`` from an event-file key or full path under ``events/<STEP12>/``, else ``None``.

    Examples
    --------
    >>> parse_event_file_name("/tmp/run/events/000000000005/000000000005_worker_1.tfevents")
    (5, 'worker_1')
    """
    return _parse_step_file(key, ("tfevents",), EVENTS_DIR)


def parse_collections_file_name(key: str) -> str | None:
    """The worker of a collections key or full path, else ``None``.

    Examples
    --------
    >>> parse_collections_file_name("s3://b/run/collections/000000000/worker_0_collections.json")
    'worker_0'
    """
    m = _COLLECTIONS_FILE.search(key)
    if m is None:
        return None
    return deserialize_worker(m.group(1))

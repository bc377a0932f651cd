"""What smdebug's system and framework readers share: the file list by time, and queries over it.

A reader knows, for each file it has listed, the time its name carries (a system file's first sample, a
trace file's last event end) and answers ``get_events(start, end)`` by reading only the files whose time
can hold events of that window, padded by smdebug's time buffer (3 minutes; ``TIME_BUFFER_MICROSECONDS``),
since an event is written to the file that is open when it *ends*.

Listing goes through :meth:`tornasole.storage.Storage.list` with a ``start_after`` that trails the newest
file by smdebug's trailing duration (5 minutes; ``TRAILING_DURATION_MICROSECONDS``): a live job's reader
lists only what is new, and a node's file that lands late (but within that duration) is still found.
"""

from __future__ import annotations

import bisect
import logging
import os
import time
from collections.abc import Callable, Iterable

from tornasole.exceptions import ConfigurationError, FormatError
from tornasole.profiler.format import paths
from tornasole.profiler.readers.bounded_read import MAX_FILE_BYTES, ProfilerFileTooLarge
from tornasole.profiler.readers.units import (
    CONVERT_TO_MICROSECS,
    TimeUnits,
    convert_utc_timestamp_to_microseconds,
)
from tornasole.storage import ReadRequest, Storage, get_storage, is_s3

__all__ = [
    "LocalRootReader",
    "S3RootReader",
    "MAX_FILE_BYTES",
    "TIME_BUFFER_DEFAULT",
    "TRAILING_DURATION_DEFAULT",
    "ENV_TIME_BUFFER",
    "ENV_TRAILING_DURATION",
    "MetricsReaderBase",
    "resolve_profiler_root",
]

logger = logging.getLogger(__name__)

ENV_TIME_BUFFER = "TIME_BUFFER_MICROSECONDS"
ENV_TRAILING_DURATION = "TRAILING_DURATION_MICROSECONDS"
TIME_BUFFER_DEFAULT = 3 * 60 * CONVERT_TO_MICROSECS
TRAILING_DURATION_DEFAULT = 5 * 60 * CONVERT_TO_MICROSECS


def _env_microseconds(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} must be a whole number of microseconds") from None
    if value < 0:
        raise ConfigurationError(f"{name}={raw!r} must not be negative")
    return value


def resolve_profiler_root(path: str, storage: Storage | None = None) -> str:
    """The profiler root for ``path``: ``path`` itself, or ``<path>/profiler-output`` for a trial's path.

    smdebug's readers take the profiler root; people also pass the trial (the job's output path), where
    the root is one level down. A path that already has ``system/`` or ``framework/`` is taken as it is;
    so is one named ``profiler-output``. Before a live job has written anything, any other path is taken
    for a trial, where its hooks will write (waiting on the path itself would never see a file).
    """
    path = path.rstrip("/") or "/"
    if path.endswith("/" + paths.PROFILER_DIR):
        return path
    store = storage if storage is not None else get_storage(path)
    for child in ("system/", "framework/"):
        if next(iter(store.list(f"{path}/{child}")), None) is not None:
            return path
    return paths.profiler_root(path)


class MetricsReaderBase:
    """The file list of one kind of profiler file under a root, and smdebug's ``get_events`` over it.

    ``use_in_memory_cache=True`` keeps parsed events between queries (a notebook re-querying windows);
    otherwise each query reads its files afresh and keeps nothing (smdebug's default, bounded memory).
    """

    #: The folder under the profiler root this reader lists (``system`` or ``framework``).
    prefix: str = ""

    def __init__(
        self,
        root: str,
        use_in_memory_cache: bool = False,
        *,
        storage: Storage | None = None,
        max_file_bytes: int = MAX_FILE_BYTES,
    ) -> None:
        if not isinstance(root, str) or not root:
            raise ConfigurationError(f"profiler path {root!r} must be a local path or an s3:// URI")
        self.root = root.rstrip("/") or "/"
        self._storage = storage if storage is not None else get_storage(self.root)
        self._cache_events_in_memory = bool(use_in_memory_cache)
        self._max_file_bytes = int(max_file_bytes)
        self._timestamp_to_filename: dict[int, list[str]] = {}
        self._known_files: set[str] = set()
        self._parsed_files: set[str] = set()
        self._start_after: str | None = None
        self.logger = logger
        self._make_parsers()
        # listed at once, so that get_timestamp_of_latest_available_file() answers before any query (smdebug)
        self.refresh_event_file_list()

    # --- what a subclass says -------------------------------------------------------------------------
    def _make_parsers(self) -> None:
        """Create the parsers this reader decodes its files into (before the first listing)."""
        raise NotImplementedError

    def get_all_event_parsers(self) -> list:
        raise NotImplementedError

    def _get_timestamp_from_filename(self, event_file: str) -> int | None:
        raise NotImplementedError

    def _get_event_parser(self, event_file: str):
        raise NotImplementedError

    def _first_file_index(self, stamps: list[int], start_us: int) -> int:
        """Where in the sorted file times ``stamps`` the files that can hold events from ``start_us`` on
        begin (what a name's time means differs between system and trace files)."""
        raise NotImplementedError

    # --- the file list --------------------------------------------------------------------------------
    @property
    def list_prefix(self) -> str:
        """The folder this reader lists, with its trailing ``/``."""
        return f"{self.root}/{self.prefix}/"

    @property
    def _startAfter_prefix(self) -> str:  # noqa: N802 - smdebug's attribute, read by its tests and notebooks
        """smdebug's name: the key listing restarts after (without ``s3://bucket/`` for S3, as smdebug)."""
        if not self._start_after:
            return ""
        if is_s3(self._start_after):
            return self._start_after.split("/", 3)[3]
        return self._start_after

    def refresh_event_file_list(self) -> None:
        """List what is new under the reader's folder and add it to the time -> files map."""
        for path in self._storage.list(self.list_prefix, start_after=self._start_after):
            if path in self._known_files:
                continue
            timestamp = self._get_timestamp_from_filename(path)
            if timestamp is None:
                self.logger.debug("not a profiler file of this kind, skipped: %s", path)
                continue
            self._known_files.add(path)
            bisect.insort(self._timestamp_to_filename.setdefault(timestamp, []), path)
        self._update_start_after()

    def _update_start_after(self) -> None:
        if not self._timestamp_to_filename:
            return
        stamps = sorted(self._timestamp_to_filename)
        trailing = stamps[-1] - _env_microseconds(ENV_TRAILING_DURATION, TRAILING_DURATION_DEFAULT)
        first_recent = stamps[bisect.bisect_left(stamps, trailing)]
        candidate = self._timestamp_to_filename[first_recent][0]
        # never move backwards: a path before the current one would re-list what is known
        if self._start_after is None or candidate > self._start_after:
            self._start_after = candidate

    def get_timestamp_of_first_available_file(self) -> int:
        """The smallest time a listed file's name carries (epoch us); 0 before any file is listed."""
        return min(self._timestamp_to_filename) if self._timestamp_to_filename else 0

    def get_timestamp_of_latest_available_file(self) -> int:
        """The largest time a listed file's name carries (epoch us); 0 before any file is listed."""
        return max(self._timestamp_to_filename) if self._timestamp_to_filename else 0

    def get_current_time_range_for_event_query(self) -> tuple[int, int]:
        return (self.get_timestamp_of_first_available_file(), self.get_timestamp_of_latest_available_file())

    def _time_buffer(self) -> int:
        return _env_microseconds(ENV_TIME_BUFFER, TIME_BUFFER_DEFAULT)

    def _get_event_files_in_the_range(
        self, start_time_microseconds: int, end_time_microseconds: int, use_buffer: bool = True
    ) -> list[str]:
        """The files that can hold events of the window (padded by the time buffer): from the one
        :meth:`_first_file_index` picks for its start to the first whose time is at or after its end.
        A window reaching past the newest file listed lists again first (a live job's new files)."""
        if use_buffer:
            buffer = self._time_buffer()
            start_time_microseconds -= buffer
            end_time_microseconds += buffer
        if end_time_microseconds >= self.get_timestamp_of_latest_available_file():
            self.refresh_event_file_list()
        stamps = sorted(self._timestamp_to_filename)
        lower = self._first_file_index(stamps, start_time_microseconds)
        upper = bisect.bisect_left(stamps, end_time_microseconds)
        return [f for stamp in stamps[lower : upper + 1] for f in self._timestamp_to_filename[stamp]]

    # --- reading --------------------------------------------------------------------------------------
    def listed_files(self) -> list[str]:
        """Every file listed so far, oldest first (by the time its name carries)."""
        return [
            f for stamp in sorted(self._timestamp_to_filename) for f in self._timestamp_to_filename[stamp]
        ]

    def parse_event_files(
        self, event_files: Iterable[str], *, on_error: Callable[[str, FormatError], None] | None = None
    ) -> None:
        """Read and decode the files not read yet (concurrently through storage), each at most the cap.

        A file that cannot be read, is over the cap or does not decode raises, naming it; with
        ``on_error`` it is handed there instead (its error names it) and the other files are still
        read: a whole-run view (the report) shows what it can and lists what it could not.
        """
        todo = [f for f in dict.fromkeys(event_files) if f not in self._parsed_files]
        if not todo:
            return
        cap = self._max_file_bytes
        requests = [ReadRequest(f, 0, cap + 1) for f in todo]
        results = self._storage.read_many(requests, on_error="raise" if on_error is None else "return")
        for event_file, data in zip(todo, results):
            try:
                if isinstance(data, BaseException):  # only with on_error: read_many raised otherwise
                    raise FormatError(f"{event_file}: cannot read it: {data}")
                if len(data) > cap:
                    raise ProfilerFileTooLarge(
                        f"{event_file}: profiler file is over {cap} bytes (profilers rotate files at 10 MB); "
                        "not reading it"
                    )
                self._parse_bytes(event_file, data)
            except FormatError as exc:
                if on_error is None:
                    raise
                on_error(event_file, exc)
                continue
            self._parsed_files.add(event_file)

    def _parse_bytes(self, event_file: str, data: bytes) -> None:
        raise NotImplementedError

    def get_events(
        self,
        start_time: float,
        end_time: float,
        unit: TimeUnits = TimeUnits.MICROSECONDS,
        event_type: str | None = None,
        file_suffix_filter: list[str] | None = None,
    ) -> list:
        """The events of ``[start_time, end_time]`` (in ``unit``), from the files that can hold them.

        ``event_type`` (system readers) keeps one device kind (``"cpu"``, ``"gpu"``...);
        ``file_suffix_filter`` (framework readers) keeps files whose name ends with one of the suffixes.
        """
        start_us = convert_utc_timestamp_to_microseconds(start_time, unit)
        end_us = convert_utc_timestamp_to_microseconds(end_time, unit)
        files = self._get_event_files_in_the_range(start_us, end_us)
        if file_suffix_filter is not None:
            files = [f for f in files if any(f.endswith(suffix) for suffix in file_suffix_filter)]
        self.parse_event_files(files)
        result: list = []
        for parser in self._parsers_for(file_suffix_filter):
            if event_type is not None:
                result.extend(
                    parser.get_events_within_time_range(start_us, end_us, TimeUnits.MICROSECONDS, event_type)
                )
            else:
                result.extend(parser.get_events_within_time_range(start_us, end_us, TimeUnits.MICROSECONDS))
            if not self._cache_events_in_memory:
                parser.clear_events()
        if not self._cache_events_in_memory:
            self._parsed_files = set()
        return result

    def _parsers_for(self, file_suffix_filter: list[str] | None) -> list:
        """The parsers whose events a query with this suffix filter may return (all, by default)."""
        return self.get_all_event_parsers()

    def _get_time_interval_for_step(self, start_step: int, end_step: int) -> tuple[int, int]:
        """From the start of ``start_step`` to just before the start of ``end_step`` (python timelines)."""
        events = self.get_events(
            0,
            time.time() * CONVERT_TO_MICROSECS,
            TimeUnits.MICROSECONDS,
            file_suffix_filter=[paths.PYTHON_TIMELINE_SUFFIX],
        )
        events.sort(key=lambda event: event.start_time)
        start_us = end_us = None
        for event in events:
            args = getattr(event, "event_args", None)
            if not args or "step_num" not in args:
                continue
            try:
                step = int(args["step_num"])
            except (TypeError, ValueError):
                continue
            if start_us is None and step == start_step:
                start_us = event.start_time
            if end_us is None and step == end_step:
                end_us = event.start_time - 1
            if start_us is not None and end_us is not None:
                break
        if start_us is None or end_us is None:
            self.logger.info("no python-timeline events for step interval [%s, %s]", start_step, end_step)
            return 0, 0
        return start_us, end_us

    def get_events_by_step(
        self,
        start_step: int,
        end_step: int,
        event_type: str | None = None,
        file_suffix_filter: list[str] | None = None,
    ) -> list:
        """The events from the start of ``start_step`` to just before ``end_step`` starts (smdebug's)."""
        start_us, end_us = self._get_time_interval_for_step(start_step, end_step)
        return self.get_events(start_us, end_us, TimeUnits.MICROSECONDS, event_type, file_suffix_filter)


class LocalRootReader(MetricsReaderBase):
    """smdebug's ``Local...Reader`` constructors: a local profiler root, refused when it is an S3 URI."""

    def __init__(
        self,
        trace_root_folder: str,
        use_in_memory_cache: bool = False,
        *,
        storage: Storage | None = None,
        max_file_bytes: int = MAX_FILE_BYTES,
    ) -> None:
        if is_s3(trace_root_folder):
            name = type(self).__name__
            raise ConfigurationError(
                f"{trace_root_folder}: {name} reads a local folder; use {name.replace('Local', 'S3', 1)}"
            )
        self.trace_root_folder = trace_root_folder
        super().__init__(
            trace_root_folder, use_in_memory_cache, storage=storage, max_file_bytes=max_file_bytes
        )


class S3RootReader(MetricsReaderBase):
    """smdebug's ``S3...Reader`` constructors: an ``s3://`` profiler root, split into bucket and folder."""

    def __init__(
        self,
        s3_trial_path: str,
        use_in_memory_cache: bool = False,
        *,
        storage: Storage | None = None,
        max_file_bytes: int = MAX_FILE_BYTES,
    ) -> None:
        if not is_s3(s3_trial_path):
            raise ConfigurationError(
                f"{s3_trial_path!r}: {type(self).__name__} needs an S3 path, e.g. s3://bucket/job/profiler-output"
            )
        self.bucket_name, _, self.base_folder = s3_trial_path[len("s3://") :].partition("/")
        super().__init__(s3_trial_path, use_in_memory_cache, storage=storage, max_file_bytes=max_file_bytes)

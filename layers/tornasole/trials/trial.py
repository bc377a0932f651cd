"""The Trial: one training run's saved tensors, local or on S3, read through one Storage.

Construction reads the collections file (``num_workers``) and the index files;
event files are read later, one record per value. A live trial refreshes itself
on queries (``dynamic_refresh``; see :mod:`tornasole.analysis.utils`) by
listing only index keys after its token (see :mod:`tornasole.trials.loading`).
The listing that follows the first sight of the end marker is final: writers
(ours and smdebug's) publish the end marker after every index file, and both a
local directory and S3 (strongly consistent since 2020) show a listing made
after that marker everything written before it. So a finished local trial opens
as fast as its index files can be read, with no sleep; a remote trial lists
once more, at once: one request, a second look for stores or copies (an S3
replica, a sync tool) that may lag behind the marker.
``$TORNASOLE_TRAINING_END_DELAY_REFRESH`` (seconds, default 0) adds a wait
before that last listing, for writers that put the marker first (smdebug's
``TRAINING_END_DELAY_REFRESH``). From then on every step is complete and
nothing is listed again. Live trials wait for data with a backoff from a few
milliseconds up to ``poll_interval`` (see :mod:`tornasole.trials.stepping`).

A trial built with ``listing=False`` never lists anything: it knows only the
index files handed to :meth:`Trial.load_index_files` (the serverless evaluator
builds a trial for one step from an S3 notification this way).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Sequence

from tornasole.config import TRAINING_END_DELAY_REFRESH
from tornasole.exceptions import ConfigurationError, MissingCollectionFiles
from tornasole.format import paths
from tornasole.modes import GLOBAL, ModeKeys
from tornasole.storage import LocalStorage, Storage, get_storage, is_s3, join
from tornasole.trials.caches import ValueCache
from tornasole.trials.loading import IndexLoader
from tornasole.trials.local_reader import MappedValueReader
from tornasole.trials.readahead import DEFAULT_READAHEAD_BYTES
from tornasole.trials.reading import DEFAULT_CACHE_BYTES, ValueReader
from tornasole.trials.step_index import ENTRY_LOCATION, StepTable, entry_locations
from tornasole.trials.stepping import StepQueries, backoff
from tornasole.trials.tensor_queries import TensorQueries

__all__ = ["Trial"]

logger = logging.getLogger(__name__)

#: Seconds ``create_trial`` waits for a first collections file before going on without one.
DEFAULT_COLLECTIONS_TIMEOUT = 10.0


class Trial(StepQueries, TensorQueries):
    """Saved tensors of one training run (use :func:`tornasole.trials.create_trial`).

    Parameters
    ----------
    name : str
    path : str
        Trial directory or ``s3://bucket/prefix``.
    range_steps : (int or None, int or None), optional
        Load only global steps ``begin <= step < end``.
    listing : bool
        ``False``: never list; only :meth:`load_index_files` adds steps.
    storage : Storage, optional
        Defaults to ``get_storage(path)``.
    collections_timeout : float
        Seconds to poll for the first collections file (listing trials only).
        If the end marker is there and no collections file, raises
        :class:`MissingCollectionFiles`; past the timeout the trial goes on and
        keeps looking on each refresh (no step is complete until it knows
        ``num_workers`` or training ends).
    poll_interval : float
        Longest wait between two polls of a live trial (collections,
        :meth:`wait_for_steps`); polls start a few milliseconds apart and back off to it.
    cache_bytes : int
        Budget of the value cache of a remote trial (local trials decode from
        mapped event files and cache no values).
    readahead_bytes : int, optional
        Window read around a missed value, within its event file (see
        :mod:`tornasole.trials.readahead`); default 1 MiB on S3, 0 locally.
    value_cache : ValueCache, optional
        A value cache that outlives this trial, consulted after the trial's own
        (remote trials): the serverless evaluator's warm process keeps the values
        decoded at earlier steps there (``tornasole.trials.caches.TieredValueCache``).

    Examples
    --------
    >>> from tornasole.trials import create_trial
    >>> trial = create_trial("/tmp/run")  # doctest: +SKIP
    >>> trial.steps(), trial.tensor("loss").value(0)  # doctest: +SKIP
    """

    def __init__(
        self,
        name: str,
        path: str,
        *,
        range_steps: tuple[int | None, int | None] | None = None,
        listing: bool = True,
        storage: Storage | None = None,
        collections_timeout: float = DEFAULT_COLLECTIONS_TIMEOUT,
        poll_interval: float = 1.0,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        readahead_bytes: int | None = None,
        value_cache: ValueCache | None = None,
    ) -> None:
        self.name = name
        self.path = self.trial_dir = path
        self.range_steps = _check_range(range_steps)
        self.listing = listing
        self.poll_interval = poll_interval
        self.dynamic_refresh = True
        self._storage = storage if storage is not None else get_storage(path)
        self._table = StepTable(assume_complete_when_unknown=not listing)
        self._loader = IndexLoader(self._storage, path, self._table, self.range_steps)
        if readahead_bytes is None:
            readahead_bytes = DEFAULT_READAHEAD_BYTES if is_s3(path) else 0
        if isinstance(self._storage, LocalStorage) and not readahead_bytes:
            self._reader = MappedValueReader(self._storage)  # decoded straight from mapped event files
        else:
            self._reader = ValueReader(self._storage, cache_bytes, readahead_bytes, shared_values=value_cache)
        self._tensors = {}
        self._created_collections = {}
        self._refresh_lock = threading.RLock()
        self._ended = False
        self._end_delay = _end_delay()
        self._relist_after_end = is_s3(path) or not isinstance(self._storage, LocalStorage)
        if listing:
            self._wait_for_collections(collections_timeout)
            self.maybe_refresh()  # a finished trial: one listing, final

    # -- loading -------------------------------------------------------------------------------
    def _wait_for_collections(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        delays = backoff(self.poll_interval)
        while not self._loader.load_collections():
            if self.training_ended():
                if self._loader.load_collections():
                    return
                raise MissingCollectionFiles(self.path)
            if time.monotonic() >= deadline:
                logger.warning("trial %s: no collections file under %s yet; going on", self.name, self.path)
                return
            time.sleep(min(next(delays), max(0.0, deadline - time.monotonic())))

    def refresh(self) -> None:
        """Load index files that appeared since the last refresh (lists only after the token)."""
        if not self.listing:
            return
        with self._refresh_lock:
            if self._loader.collections is None:
                self._loader.load_collections()
            self._loader.refresh()

    def maybe_refresh(self, name: str | None = None) -> None:
        """Refresh unless refreshing is off or every step was loaded (end-marker protocol above)."""
        if self.loaded_all_steps or not self.dynamic_refresh or not self.listing:
            return
        with self._refresh_lock:
            if self.loaded_all_steps:
                return
            ended = self.training_ended()
            self.refresh()
            if not ended:
                return
            if self._end_delay > 0:  # opt-in: the writer may put the marker before its last index
                time.sleep(self._end_delay)
                self.refresh()
            elif self._relist_after_end:  # remote: one more listing, no sleep
                self.refresh()
            if self._loader.collections is None:
                raise MissingCollectionFiles(self.path)
            self._table.mark_all_loaded()
            logger.info("trial %s: training ended, loaded all steps", self.name)

    def load_index_files(self, index_paths: Iterable[str]) -> list[int]:
        """Read exactly these index files (full paths or keys relative to the trial); no listing.

        The collections file of the first file's worker is read by its key when
        no collections were loaded yet. Steps outside ``range_steps`` are ignored.

        Returns
        -------
        list of int
            Global steps loaded. Missing files are skipped; undecodable ones are
            recorded in :attr:`bad_steps`, not returned.

        Examples
        --------
        >>> trial = create_trial("s3://b/run", listing=False)  # doctest: +SKIP
        >>> trial.load_index_files(["index/000000000/000000000010_worker_0.json"])  # doctest: +SKIP
        [10]
        """
        keys = []
        for p in index_paths:
            full = p if p.startswith(self.path) else join(self.path, p)
            parsed = paths.parse_index_file_name(full)
            if parsed is None:
                raise ValueError(f"trial {self.name}: {full!r} is not an index file name")
            if self._loader.in_range(parsed[0]):
                keys.append((full, parsed[0], parsed[1]))
        with self._refresh_lock:
            if keys and self._loader.collections is None:
                self._loader.load_collections_for(keys[0][2])
            return self._loader.load(keys)

    def prefetch(
        self,
        names: Iterable[str],
        steps: Iterable[int],
        mode: ModeKeys = GLOBAL,
        workers: Sequence[str] | None = None,
        include_reductions: bool = True,
    ) -> int:
        """Fetch and cache, concurrently, the values (and saved reductions) of ``names`` at ``steps``.

        Remote trials read each event file once for all of its records asked
        for; local trials only map the event files (values are decoded on
        read). Unknown names or steps are ignored; read errors surface on the
        later ``value()`` call. Returns the number of records fetched (locally:
        that lie within their event files).

        Examples
        --------
        >>> trial.prefetch(["loss", "gradient/fc1.weight"], trial.steps())  # doctest: +SKIP
        52
        """
        self.maybe_refresh()
        locs = []
        steps = list(steps)
        for name in names:
            for step in steps:
                g = self._table.global_step(mode, step)
                for w, entry in self._table.entries(name, g).items() if g is not None else ():
                    if workers is None or w in workers:
                        if include_reductions:
                            locs.extend(entry_locations(entry))
                        elif entry[ENTRY_LOCATION] is not None:
                            locs.append(entry[ENTRY_LOCATION])
        return self._reader.prefetch(locs, self._table.neighbors)

    # -- state -----------------------------------------------------------------------------------
    def training_ended(self) -> bool:
        """Whether the end marker exists (checked until first seen)."""
        if not self._ended:
            self._ended = self._storage.exists(join(self.path, paths.END_MARKER))
        return self._ended

    @property
    def loaded_all_steps(self) -> bool:
        return self._table.all_loaded

    @property
    def is_complete(self) -> bool:
        """Training ended and every step was loaded."""
        self.maybe_refresh()
        return self.loaded_all_steps

    @property
    def num_workers(self) -> int:
        """Workers per step from the collections file (0 while unknown)."""
        return self._table.num_workers or 0

    @property
    def last_complete_step(self) -> int:
        return self._table.last_complete_step

    @property
    def last_index_token(self) -> str | None:
        """The ``start_after`` key of the next listing."""
        return self._loader.token

    @property
    def bad_steps(self) -> dict[tuple[int, str], Exception]:
        """``(step, worker) -> error`` for index files that could not be loaded."""
        return dict(self._table.bad)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r} path={self.path!r}>"

    def __hash__(self) -> int:
        return hash((self.name, self.path))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trial):
            return NotImplemented
        return (self.name, self.path) == (other.name, other.path)


def _end_delay() -> float:
    raw = os.environ.get(TRAINING_END_DELAY_REFRESH) or "0"
    try:
        delay = float(raw)
    except ValueError:
        delay = -1.0
    if delay < 0:
        raise ConfigurationError(f"{TRAINING_END_DELAY_REFRESH}={raw!r} is not a number of seconds >= 0")
    return delay


def _check_range(rs: Sequence[int | None] | None) -> tuple[int | None, int | None] | None:
    if rs is None:
        return None
    if len(rs) != 2:
        raise ValueError(f"range_steps must be (begin, end), got {rs!r}")
    begin, end = rs
    for v in (begin, end):
        if v is not None and (not isinstance(v, int) or v < 0):
            raise ValueError(f"range_steps bounds must be non-negative ints or None, got {rs!r}")
    if begin is not None and end is not None and end <= begin:
        raise ValueError(f"range_steps must be (begin, end) with begin < end, got {rs!r}")
    return (begin, end)

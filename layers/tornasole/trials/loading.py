"""Loading index and collections files into a :class:`StepTable`, listing only what is new.

smdebug re-reads index keys from a token derived from its last complete step;
we do the same, so a live trial's refresh costs one ``list(prefix,
start_after=token)`` returning only keys not yet settled, never a re-listing of
the whole trial. The token is the greatest loaded key whose step is complete:
keys of incomplete multi-worker steps sort after it and are listed again (their
late workers may still land) but, already seen, are not re-read.

``range_steps=(begin, end)`` (global steps, ``begin <= step < end``) starts the
listing at ``begin``'s first key and stops it at the first key past ``end``.

If more than ``INCOMPLETE_STEP_WINDOW`` steps wait for a worker that stopped
writing, the older half is treated as complete (smdebug's
``INCOMPLETE_STEP_WAIT_WINDOW``), so listings stay bounded.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable

from tornasole.core.collection import Collection
from tornasole.exceptions import FormatError, IndexReaderException, TornasoleError
from tornasole.format import collections as collections_format
from tornasole.format import index as index_format
from tornasole.format import paths, reductions
from tornasole.format.tfrecord import OVERHEAD
from tornasole.storage import ReadRequest, Storage, join
from tornasole.trials.reading import bare_message
from tornasole.trials.step_index import RecordLocation, StepTable, TensorEntry, flat_reductions

__all__ = ["IndexLoader", "entries_from_document", "step_key_prefix"]

logger = logging.getLogger(__name__)

#: Incomplete steps (some worker's index missing) waited on before the older half is settled.
INCOMPLETE_STEP_WINDOW = 1000


@functools.lru_cache(maxsize=1 << 16)
def _parse_tag(tag: str) -> tuple[str, str, bool] | None:
    """Cached: the same tags repeat at every step of a trial."""
    return reductions.parse_reduction_tag(tag)


def step_key_prefix(trial_path: str, step: int) -> str:
    """The common prefix of every index key of ``step`` (sorts after all keys of earlier steps)."""
    return join(trial_path, "index", f"{step // 1000:09d}", f"{step:012d}")


def entries_from_document(
    doc: index_format.IndexDocument, *, trial_path: str, step: int, worker: str, index_path: str
) -> dict[str, TensorEntry]:
    """Per-tensor entries of one parsed index file, built straight from its JSON entries.

    A repeated tag keeps its last entry (what smdebug does, FORMAT.md 3). A
    ``shape_payload`` entry only adds a shape: unlike smdebug it never hides the
    location of a saved value. An entry that is not well formed (a length that
    cannot hold a record, a negative offset, a wrong type) does not drop the
    step: like smdebug, the step keeps its mode and mode step, the tensor is
    listed, and reading it raises the entry's error. An entry without a tensor
    name cannot be attributed to any tensor and is skipped with a warning.

    Locations and entries are plain tuples in the layouts of
    :class:`RecordLocation` and :class:`TensorEntry` (why: the former's docstring).
    """
    event_path = join(trial_path, doc.event_file_name or paths.event_file_name(step, worker))
    # name -> its value's location (None: its last value entry was malformed), in payload order
    values: dict[str, RecordLocation | None] = {}
    reduced: dict[str, dict[tuple[str, bool], RecordLocation]] = {}
    errors: dict[str, Exception] = {}
    for i, raw in enumerate(doc.tensor_payload):
        if type(raw) is dict:  # the well-formed case inline: one location tuple per record
            tag, start, length = raw.get("tensorname"), raw.get("start_idx"), raw.get("length")
            typed = type(tag) is str and type(start) is int and type(length) is int  # bools rejected
            if typed and start >= 0 and length >= OVERHEAD:
                loc = (event_path, start, length, tag, step, worker, index_path)
                parsed = _parse_tag(tag)
                if parsed is None:
                    values[tag] = loc
                    if errors:
                        errors.pop(tag, None)
                else:
                    name, red, is_abs = parsed
                    saved = reduced.get(name)
                    if saved is None:
                        reduced[name] = {(red, is_abs): loc}
                    else:
                        saved[(red, is_abs)] = loc
                continue
        _add_bad_entry(values, reduced, errors, raw, i, step, index_path)
    shapes = {sh.tensorname: tuple(int(d) for d in sh.shape) for sh in doc.shapes}
    if not reduced and not errors and not shapes:  # the usual index: values only
        return {name: (loc, None, (), None) for name, loc in values.items()}
    out: dict[str, TensorEntry] = {}
    for name in dict.fromkeys([*values, *reduced, *errors, *shapes]):
        saved = reduced.get(name)
        reds = flat_reductions(saved) if saved else ()
        out[name] = (values.get(name), shapes.get(name), reds, errors.get(name))  # type: ignore[assignment]
    return out


def _add_bad_entry(
    values: dict[str, RecordLocation | None],
    reduced: dict[str, dict[tuple[str, bool], RecordLocation]],
    errors: dict[str, Exception],
    raw: object,
    i: int,
    step: int,
    index_path: str,
) -> None:
    """Record a malformed ``tensor_payload[i]`` so that reading its tensor raises why.

    A malformed value entry replaces the tensor's value (reading it raises); a
    malformed reduction entry only gives a tensor with no value yet an error.
    """
    cause = index_format.tensor_entry_error(raw, i, index_path)
    tag = raw.get("tensorname") if isinstance(raw, dict) else None
    if not isinstance(tag, str):
        logger.warning("index file %s: %s; entry skipped", index_path, bare_message(cause))
        return
    err = IndexReaderException(
        f"cannot read this tensor: {bare_message(cause)}", path=index_path, step=step, tensor_name=tag
    )
    err.__cause__ = cause
    logger.warning("%s", err)
    parsed = _parse_tag(tag)
    if parsed is None:
        values[tag] = None
        errors[tag] = err
        return
    name = parsed[0]
    if name not in reduced:
        reduced[name] = {}
    if values.get(name) is None and name not in errors:
        errors[name] = err


class IndexLoader:
    """Lists, reads and registers index files of one trial.

    Parameters
    ----------
    storage : Storage
    trial_path : str
    table : StepTable
        Where loaded steps go.
    range_steps : tuple of (int or None, int or None), optional
        Only global steps ``begin <= step < end`` are loaded.
    """

    def __init__(
        self,
        storage: Storage,
        trial_path: str,
        table: StepTable,
        range_steps: tuple[int | None, int | None] | None = None,
    ) -> None:
        self.storage = storage
        self.trial_path = trial_path
        self.table = table
        self.begin, self.end = range_steps if range_steps is not None else (None, None)
        self.index_prefix = join(trial_path, "index/")
        self.token: str | None = step_key_prefix(trial_path, self.begin) if self.begin else None
        self._pending: dict[str, int] = {}  # keys after the token already read -> step
        self.collections: dict[str, Collection] | None = None
        self.collection_files: list[str] = []

    # -- index files -----------------------------------------------------------------------------
    def in_range(self, step: int) -> bool:
        return (self.begin is None or step >= self.begin) and (self.end is None or step < self.end)

    def refresh(self) -> int:
        """List index keys after the token, load the new ones; return how many were new."""
        new: list[tuple[str, int, str]] = []
        for key in self.storage.list(self.index_prefix, start_after=self.token):
            if key in self._pending:
                continue
            parsed = paths.parse_index_file_name(key)
            if parsed is None:
                self._pending[key] = -1
                continue
            step, worker = parsed
            if self.end is not None and step >= self.end:
                break
            if self.in_range(step):
                new.append((key, step, worker))
            else:
                self._pending[key] = step
        self.load(new)
        self._advance_token()
        return len(new)

    def load(self, keys: Iterable[tuple[str, int, str]]) -> list[int]:
        """Read the given ``(key, step, worker)`` index files concurrently and register them.

        A missing file is skipped; one that cannot be decoded is recorded as a bad step.
        """
        keys = list(keys)
        if not keys:
            return []
        results = self.storage.read_many([ReadRequest(k) for k, _, _ in keys], on_error="return")
        loaded = []
        for (key, step, worker), data in zip(keys, results):
            if isinstance(data, FileNotFoundError):
                logger.debug("index file %s is not there (yet): skipped", key)
                continue  # not written (yet): nothing to register, not a bad step
            self._pending[key] = step
            try:
                if isinstance(data, BaseException):
                    raise data
                idx = index_format.decode_index_document(data, key)
                tensors = entries_from_document(
                    idx, trial_path=self.trial_path, step=step, worker=worker, index_path=key
                )
            except (FormatError, OSError, ValueError, TypeError, KeyError) as exc:
                reason = bare_message(exc) if isinstance(exc, FormatError) else f"{type(exc).__name__}: {exc}"
                err = IndexReaderException(f"cannot load index file: {reason}", path=key, step=step)
                err.__cause__ = exc
                logger.warning("bad index file, step %s worker %s skipped: %s", step, worker, err)
                self.table.add_bad(step, worker, err)
                continue
            self.table.add_step(step, worker, idx.mode, int(idx.mode_step), tensors)
            loaded.append(step)
        return sorted(set(loaded))

    def _advance_token(self) -> None:
        """Move the token to the greatest read key whose step is settled (complete)."""
        last = self.table.last_complete_step
        waiting = sorted({s for s in self._pending.values() if s > last})
        if len(waiting) > INCOMPLETE_STEP_WINDOW and self.table.num_workers is not None:
            # a worker stopped writing: like smdebug, give up waiting on the older half
            last = waiting[len(waiting) // 2 - 1]
            logger.warning("%d incomplete steps: treating steps up to %d as complete", len(waiting), last)
            self.table.settle_through(last)
        settled = [k for k, s in self._pending.items() if s <= last]
        if not settled:
            return
        best = max(settled)
        if self.token is None or best > self.token:
            self.token = best
        self._pending = {k: s for k, s in self._pending.items() if k > self.token}

    # -- collections -------------------------------------------------------------------------------
    def load_collections(self) -> bool:
        """Read the first collections file (sorted) for collections and ``num_workers``.

        Returns ``False`` when there is none yet. A malformed file raises a
        :class:`FormatError` naming it.
        """
        files = [
            f
            for f in self.storage.list(join(self.trial_path, "collections/"))
            if paths.parse_collections_file_name(f) is not None
        ]
        if not files:
            return False
        self._read_collections(files[0])
        self.collection_files = files
        self.table.add_workers(paths.parse_collections_file_name(f) for f in files)
        return True

    def load_collections_for(self, worker: str) -> bool:
        """Read ``worker``'s collections file by its key (no listing); ``False`` if it does not exist."""
        key = join(self.trial_path, paths.collections_file_name(worker))
        try:
            self._read_collections(key)
        except FileNotFoundError:
            return False
        self.collection_files = [key]
        return True

    def _read_collections(self, key: str) -> None:
        # bounded: a collections file is small JSON; whoever writes the trial could make it any size
        data = self.storage.read(key, 0, collections_format.MAX_COLLECTIONS_BYTES + 1)
        if len(data) > collections_format.MAX_COLLECTIONS_BYTES:
            raise FormatError(
                f"collections file larger than {collections_format.MAX_COLLECTIONS_BYTES} bytes, not read",
                path=key,
            )
        raw, num_workers = collections_format.decode_collections(data, key)
        try:
            colls = {name: Collection.from_json_dict(d) for name, d in raw.items()}
        except (TornasoleError, ValueError, TypeError) as exc:
            raise FormatError(f"bad collection: {exc}", path=key) from exc
        self.collections = colls
        self.table.set_num_workers(num_workers)

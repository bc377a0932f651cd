"""Index files: where each record of one (step, worker) event file lives (FORMAT.md 3).

An index file is one JSON object ``{"meta", "tensor_payload", "shape_payload"}``
written by ``json.dumps`` with default separators and no trailing newline; we
produce the same bytes so smdebug reads our trees and byte-level golden tests
hold. ``meta`` (mode name, mode step, event file path relative to the trial) comes
from the first tensor written in the file and applies to every entry.

Decoding validates everything a reader later relies on (types, non-negative
offsets, a record length that can hold the framing) so a bad file fails here,
naming the file, and not later as a confusing read error.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tornasole.exceptions import IndexReaderException
from tornasole.format.tfrecord import OVERHEAD
from tornasole.modes import ModeKeys

__all__ = [
    "IndexEntry",
    "ShapeEntry",
    "StepIndex",
    "IndexDocument",
    "encode_index",
    "index_file_bytes",
    "decode_index",
    "decode_index_document",
    "tensor_entry_error",
    "index_entry",
    "tensor_payload",
    "MAX_TENSOR_NAME_LENGTH",
]

#: A tensor name longer than this is refused when read: names are matched against patterns
#: (``safe_regex``) whose worst case grows with the name's length; TF's scoped names stay far below.
MAX_TENSOR_NAME_LENGTH = 512


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One record: ``start_idx`` is its byte offset in the event file, ``length`` its whole size."""

    tensorname: str
    start_idx: int
    length: int


@dataclass(frozen=True, slots=True)
class ShapeEntry:
    """A tensor's shape, saved without (or alongside) its value (``ReductionConfig(save_shape=True)``)."""

    tensorname: str
    originalname: str
    shape: tuple[int, ...]


@dataclass(slots=True)
class StepIndex:
    """The decoded contents of one index file.

    ``event_file_name`` is relative to the trial directory
    (``events/000000000005/000000000005_worker_0.tfevents``); it is ``None`` only
    for an index holding shapes and no tensors (smdebug then omits the key).
    """

    mode: ModeKeys
    mode_step: int
    event_file_name: str | None
    tensors: list[IndexEntry] = field(default_factory=list)
    shapes: list[ShapeEntry] = field(default_factory=list)


def encode_index(index: StepIndex, payload: str | None = None) -> bytes:
    """Serialize an index exactly as smdebug's ``IndexWriter`` does (``json.dumps`` of its dict).

    The tensor entries, one per record, are formatted directly (``json.dumps``'s
    own string escaping, default separators) instead of going through a dict
    each: a saved step of many small values writes as many entries. ``payload``
    is their :func:`tensor_payload` where the writer already has it (a scalar
    block's entries are the same every step).

    Examples
    --------
    >>> idx = StepIndex(ModeKeys.TRAIN, 5, "events/000000000005/000000000005_worker_0.tfevents",
    ...                 [IndexEntry("loss", 0, 99)], [])
    >>> encode_index(idx)[:48]
    b'{"meta": {"mode": "TRAIN", "mode_step": 5, "even'
    """
    tensors = tensor_payload(index.tensors) if payload is None else payload
    return index_file_bytes(
        index.mode, index.mode_step, index.event_file_name, [tensors.encode()], index.shapes
    )


def index_file_bytes(
    mode: ModeKeys,
    mode_step: int,
    event_file_name: str | None,
    payloads: Sequence[bytes],
    shapes: Sequence[ShapeEntry],
) -> bytes:
    """:func:`encode_index` of an index whose tensor entries are JSON already, in pieces (each a
    :func:`tensor_payload`, encoded; empty ones are skipped): the file is joined once, as bytes."""
    if type(mode_step) is int:  # what json.dumps writes for the meta dict, formatted directly
        meta = f'{{"mode": {_json_string(mode.name)}, "mode_step": {int.__repr__(mode_step)}'
        if event_file_name is not None:
            meta += f', "event_file_name": {_json_string(event_file_name)}'
        meta += "}"
    else:  # a bool or another int-like: json.dumps's own spelling
        fields: dict[str, Any] = {"mode": mode.name, "mode_step": mode_step}
        if event_file_name is not None:
            fields["event_file_name"] = event_file_name
        meta = json.dumps(fields)
    shape_json = (
        json.dumps(
            [
                {"tensorname": s.tensorname, "originalname": s.originalname, "shape": list(s.shape)}
                for s in shapes
            ]
        )
        if shapes
        else "[]"
    )
    return b"".join(
        (
            f'{{"meta": {meta}, "tensor_payload": ['.encode(),
            b", ".join([p for p in payloads if p]),
            f'], "shape_payload": {shape_json}}}'.encode(),
        )
    )


def tensor_payload(entries: Sequence[IndexEntry]) -> str:
    """The entries of an index's ``tensor_payload`` list as ``json.dumps`` writes them (no brackets)."""
    esc, number = _json_string, int.__repr__  # int.__repr__: a TypeError for what json.dumps refuses too
    return ", ".join(
        [
            f'{{"tensorname": {esc(e.tensorname)}, "start_idx": {number(e.start_idx)}, '
            f'"length": {number(e.length)}}}'
            for e in entries
        ]
    )


_json_string = json.encoder.encode_basestring_ascii  # what json.dumps (ensure_ascii) writes for a str


@dataclass(slots=True)
class IndexDocument:
    """An index file with its ``meta`` and shapes validated and its tensor entries still raw dicts.

    The trial reader turns raw entries straight into record locations (one
    object per record instead of two); :func:`tensor_entry_error` explains an
    entry that is not well formed.
    """

    mode: ModeKeys
    mode_step: int
    event_file_name: str | None
    tensor_payload: list[Any]
    shapes: list[ShapeEntry]


def decode_index(data: bytes | str, path: str | None) -> StepIndex:
    """Parse and validate one index file.

    Parameters
    ----------
    data : bytes or str
        The file contents.
    path : str or None
        The index file, named in every error.

    Raises
    ------
    IndexReaderException
        Malformed JSON, a missing section or key, a wrong type, an unknown mode,
        a negative offset or a length too small to hold a record.

    Examples
    --------
    >>> decode_index(b'{"meta": {"mode": "EVAL", "mode_step": 2, "event_file_name": "e"}, '
    ...              b'"tensor_payload": [{"tensorname": "x", "start_idx": 0, "length": 80}], '
    ...              b'"shape_payload": []}', "i.json").tensors
    [IndexEntry(tensorname='x', start_idx=0, length=80)]
    """
    doc = decode_index_document(data, path)
    return StepIndex(
        doc.mode,
        doc.mode_step,
        doc.event_file_name,
        [_tensor_entry(e, i, path) for i, e in enumerate(doc.tensor_payload)],
        doc.shapes,
    )


def decode_index_document(data: bytes | str, path: str | None) -> IndexDocument:
    """Parse one index file, validating everything but the tensor entries (see :class:`IndexDocument`).

    Raises
    ------
    IndexReaderException
        As :func:`decode_index`, for what concerns the whole file (JSON, ``meta``, sections, shapes).
    """
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise IndexReaderException(f"malformed index JSON ({e})", path=path) from None
    if not isinstance(doc, dict):
        raise IndexReaderException(f"index must be a JSON object, got {type(doc).__name__}", path=path)
    meta = doc.get("meta")
    if not isinstance(meta, dict) or not meta:
        raise IndexReaderException("index 'meta' section is missing, empty or not an object", path=path)
    if "tensor_payload" not in doc and "shape_payload" not in doc:
        raise IndexReaderException("index has neither 'tensor_payload' nor 'shape_payload'", path=path)
    mode_name = _typed(meta, "mode", str, path, "meta")
    try:
        mode = ModeKeys.from_name(mode_name.strip())
    except ValueError as e:
        raise IndexReaderException(f"index meta: {e}", path=path) from None
    mode_step = _typed(meta, "mode_step", int, path, "meta")
    tensors_raw = _typed(doc, "tensor_payload", list, path, "index", default=[])
    shapes_raw = _typed(doc, "shape_payload", list, path, "index", default=[])
    event_file_name = meta.get("event_file_name")
    if tensors_raw or event_file_name is not None:
        event_file_name = _typed(meta, "event_file_name", str, path, "meta")
    shapes = [_shape_entry(e, i, path) for i, e in enumerate(shapes_raw)]
    return IndexDocument(mode, mode_step, event_file_name, tensors_raw, shapes)


def tensor_entry_error(raw: Any, i: int, path: str | None) -> IndexReaderException | None:
    """Why ``tensor_payload[i]`` is not a usable entry (``None`` if it is)."""
    try:
        _checked_tensor_entry(raw, i, path)
    except IndexReaderException as exc:
        return exc
    return None


def _typed(obj: dict, key: str, typ: type, path: str | None, where: str, default: Any = ...) -> Any:
    if key not in obj:
        if default is not ...:
            return default
        raise IndexReaderException(f"{where}: missing key {key!r}", path=path)
    value = obj[key]
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        raise IndexReaderException(
            f"{where}: {key!r} must be {typ.__name__}, got {type(value).__name__} {value!r}", path=path
        )
    return value


def _tensor_entry(raw: Any, i: int, path: str | None) -> IndexEntry:
    """One ``tensor_payload`` entry; the well-formed case first (a trial decodes one per record)."""
    if type(raw) is dict:
        name, start, length = raw.get("tensorname"), raw.get("start_idx"), raw.get("length")
        # ``type(...) is int`` rejects bools, as _typed does
        typed = type(name) is str and type(start) is int and type(length) is int
        if typed and start >= 0 and length >= OVERHEAD and len(name) <= MAX_TENSOR_NAME_LENGTH:
            entry = _new_index_entry(IndexEntry)
            _set_tensorname(entry, name)
            _set_start_idx(entry, start)
            _set_length(entry, length)
            return entry
    return _checked_tensor_entry(raw, i, path)


def _checked_tensor_entry(raw: Any, i: int, path: str | None) -> IndexEntry:
    """:func:`_tensor_entry` with every check spelled out, raising the precise error."""
    where = f"tensor_payload[{i}]"
    if not isinstance(raw, dict):
        raise IndexReaderException(f"{where} must be an object", path=path)
    name = _typed(raw, "tensorname", str, path, where)
    start = _typed(raw, "start_idx", int, path, where)
    length = _typed(raw, "length", int, path, where)
    if len(name) > MAX_TENSOR_NAME_LENGTH:
        raise IndexReaderException(
            f"{where}: tensor name of {len(name)} characters; the limit is {MAX_TENSOR_NAME_LENGTH}",
            path=path,
        )
    if start < 0:
        raise IndexReaderException(f"{where} ({name!r}): negative start_idx {start}", path=path)
    if length < OVERHEAD:
        raise IndexReaderException(
            f"{where} ({name!r}): length {length} cannot hold a record (minimum {OVERHEAD})", path=path
        )
    return IndexEntry(name, start, length)


def _shape_entry(raw: Any, i: int, path: str | None) -> ShapeEntry:
    where = f"shape_payload[{i}]"
    if not isinstance(raw, dict):
        raise IndexReaderException(f"{where} must be an object", path=path)
    name = _typed(raw, "tensorname", str, path, where)
    if len(name) > MAX_TENSOR_NAME_LENGTH:
        raise IndexReaderException(
            f"{where}: tensor name of {len(name)} characters; the limit is {MAX_TENSOR_NAME_LENGTH}",
            path=path,
        )
    original = raw.get("originalname", name)
    if not isinstance(original, str):
        raise IndexReaderException(f"{where} ({name!r}): 'originalname' must be str", path=path)
    shape = _typed(raw, "shape", list, path, where)
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise IndexReaderException(f"{where} ({name!r}): bad shape {shape!r}", path=path)
    return ShapeEntry(name, original, tuple(shape))


# Building IndexEntry without the frozen dataclass ``__init__`` (a trial decodes one per record):
# the slot descriptors write the fields directly, as in ``format.events``.
_new_index_entry = object.__new__
_set_tensorname = IndexEntry.tensorname.__set__
_set_start_idx = IndexEntry.start_idx.__set__
_set_length = IndexEntry.length.__set__


def index_entry(tensorname: str, start_idx: int, length: int) -> IndexEntry:
    """``IndexEntry(tensorname, start_idx, length)`` without the frozen dataclass ``__init__`` (the
    writer makes one per record)."""
    entry = _new_index_entry(IndexEntry)
    _set_tensorname(entry, tensorname)
    _set_start_idx(entry, start_idx)
    _set_length(entry, length)
    return entry

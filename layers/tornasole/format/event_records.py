"""One tensor record <-> one ``Event`` payload (pure: bytes in, bytes out).

The writer side reproduces smdebug's serialization byte for byte (FORMAT.md
2.2): ``wall_time, step`` (step 0 elided by proto3), one ``Summary.Value`` with
``tag``, a ``TensorProto`` (``dtype``, a shape that is present even when empty,
``Dim.name = f"{tag}_{size}"``, raw little-endian C-order ``tensor_content``) and
``plugin_data`` ``[mode_step, mode]`` as decimal text. Values go through the same
conversion as smdebug's ``make_numpy_array``: an ndarray is kept as is (0-d stays
0-d) and a Python / numpy scalar becomes shape ``[1]``.

Decoding is one ``ParseFromString`` plus one ``np.frombuffer``: values are
read-only views of the parsed content (no extra copy); callers that mutate must
copy. :func:`decode_tensor` is the trial reader's hot path: only the tag and the
value (the index file already gives step and mode), a few microseconds a record.

dtype handling (every dtype read back as itself; strings; bfloat16; size-0
arrays) lives in :mod:`tornasole.format.tensors`.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from tornasole.exceptions import FormatError
from tornasole.format.crc import CONSTANT_PAYLOAD_CRC
from tornasole.format.event_encoding import encode_numeric_event, encode_numeric_record
from tornasole.format.proto import messages
from tornasole.format.record_scan import scan_tensor_record
from tornasole.format.tensors import fill_tensor_proto, tensor_to_array, to_array
from tornasole.format.tfrecord import FOOTER_SIZE, HEADER_SIZE, OVERHEAD, frame, length_crc
from tornasole.modes import ModeKeys

__all__ = [
    "TensorRecord",
    "encode_event",
    "encode_record",
    "decode_event",
    "decode_tensor",
    "decode_indexed_tensor",
    "to_array",
]

MODE_STEP_PLUGIN = "mode_step"
MODE_PLUGIN = "mode"


@dataclass(frozen=True, slots=True)
class TensorRecord:
    """One decoded tensor record.

    ``mode`` / ``mode_step`` are what the record's plugin data says, ``None`` when
    absent (smdebug then assumes GLOBAL and the global step; the index file's
    ``meta`` is authoritative for a step anyway, FORMAT.md 3).
    """

    tag: str
    value: np.ndarray
    step: int
    mode: ModeKeys | None
    mode_step: int | None
    wall_time: float


def _event_defaults(
    step: int, mode: ModeKeys | None, mode_step: int | None, wall_time: float | None
) -> tuple[ModeKeys, int, float]:
    """What an event says when the caller leaves them out: mode GLOBAL, mode step = step, now."""
    return (
        ModeKeys.GLOBAL if mode is None else mode,
        step if mode_step is None else mode_step,
        time.time() if wall_time is None else wall_time,
    )


def encode_event(
    tag: str,
    array: Any,
    *,
    step: int,
    mode: ModeKeys | None,
    mode_step: int | None,
    wall_time: float | None = None,
) -> bytes:
    """Serialize one tensor as an ``Event`` payload, byte-identical to smdebug.

    Parameters
    ----------
    tag : str
        Tensor name (``Summary.Value.tag``; also used in every ``Dim.name``).
    array : array-like
        The value; converted with :func:`tornasole.format.tensors.to_array`.
    step : int
        Global step (``Event.step``).
    mode : ModeKeys or None
        ``None`` means GLOBAL (as smdebug).
    mode_step : int or None
        ``None`` means ``step`` (as smdebug).
    wall_time : float, optional
        Defaults to ``time.time()``. Pass a value to get reproducible bytes.

    Raises
    ------
    TornasoleValueError
        The dtype cannot be represented (e.g. datetime64), naming the tag.

    Examples
    --------
    >>> p = encode_event("w", np.float32([1, 2]), step=5, mode=ModeKeys.TRAIN, mode_step=5, wall_time=1.0)
    >>> decode_event(p).value.tolist()
    [1.0, 2.0]
    """
    mode, mode_step, wall_time = _event_defaults(step, mode, mode_step, wall_time)
    fast = encode_numeric_event(
        tag, array, step=step, mode_value=mode.value, mode_step=mode_step, wall_time=wall_time
    )
    if fast is not None:
        return fast  # the same bytes, written without building messages (tornasole.format.event_encoding)
    ev = messages().Event(wall_time=wall_time, step=step)
    val = ev.summary.value.add(tag=tag)
    fill_tensor_proto(val.tensor, array, tag)
    plugins = val.metadata.plugin_data
    plugins.add(plugin_name=MODE_STEP_PLUGIN, content=str(mode_step).encode())
    plugins.add(plugin_name=MODE_PLUGIN, content=str(mode.value).encode())
    return ev.SerializeToString()


def encode_record(
    tag: str,
    array: Any,
    *,
    step: int,
    mode: ModeKeys | None,
    mode_step: int | None,
    wall_time: float | None = None,
) -> bytes:
    """:func:`encode_event` wrapped in TFRecord framing (constant footer), ready to append.

    Examples
    --------
    >>> len(encode_record("x", np.float32(1), step=0, mode=None, mode_step=None, wall_time=1.0))
    82
    """
    mode, mode_step, wall_time = _event_defaults(step, mode, mode_step, wall_time)
    fast = encode_numeric_record(
        tag, array, step=step, mode_value=mode.value, mode_step=mode_step, wall_time=wall_time
    )
    if fast is not None:
        return fast  # framed as frame() does, without the intermediate payload
    return frame(encode_event(tag, array, step=step, mode=mode, mode_step=mode_step, wall_time=wall_time))


def decode_event(payload: bytes | memoryview, *, path: str | None = None) -> TensorRecord:
    """Parse one ``Event`` payload holding one tensor.

    Parameters
    ----------
    payload : bytes-like
        A record payload (see ``tfrecord.read_record``).
    path : str, optional
        The event file, for error messages.

    Raises
    ------
    FormatError
        Malformed protobuf, no tensor value, unknown dtype enum, content length not
        matching the shape, bad mode plugin data; names ``path`` and the tag.

    Examples
    --------
    >>> r = decode_event(encode_event("b", np.int8([-1]), step=2, mode=ModeKeys.EVAL, mode_step=0))
    >>> (r.tag, r.value.dtype.name, r.value.tolist(), r.step, r.mode.name, r.mode_step)
    ('b', 'int8', [-1], 2, 'EVAL', 0)
    """
    ev, val = _single_value(payload, path)
    step = ev.step
    tag = val.tag
    array = tensor_to_array(val.tensor, path, step, tag)
    mode = mode_step = None
    for plugin in val.metadata.plugin_data:
        name = plugin.plugin_name
        content = plugin.content
        if name == MODE_STEP_PLUGIN:
            try:
                mode_step = int(content)
            except ValueError:
                raise FormatError(
                    f"bad mode_step plugin data {content!r}", path=path, step=step, tensor_name=tag
                ) from None
        elif name == MODE_PLUGIN:
            mode = _MODES_BY_CONTENT.get(content)
            if mode is None:
                raise FormatError(f"bad mode plugin data {content!r}", path=path, step=step, tensor_name=tag)
    return _new_record(tag, array, step, mode, mode_step, ev.wall_time)


def decode_tensor(payload: bytes | memoryview, *, path: str | None = None) -> tuple[str, np.ndarray]:
    """``(tag, value)`` of one ``Event`` payload, skipping wall time and mode plugin data.

    What a trial needs per value: the index file already says the step and
    mode, so this leaves out the rest of :func:`decode_event`'s work (and its
    checks of the plugin data, which the index makes redundant here).

    Raises
    ------
    FormatError
        As :func:`decode_event`, apart from bad mode plugin data.

    Examples
    --------
    >>> decode_tensor(encode_event("w", np.float32([1, 2]), step=3, mode=None, mode_step=None))[0]
    'w'
    """
    ev = _parse(payload, path)
    values = ev.summary.value
    if len(values) == 1:
        val = values[0]
        if val.HasField("tensor"):
            tag = val.tag
            return tag, tensor_to_array(val.tensor, path, ev.step, tag)
    raise _not_one_tensor(ev, path)


def decode_indexed_tensor(buf: bytes | memoryview, start: int, length: int, tag: str) -> np.ndarray | None:
    """The value of the well-formed record an index entry points at, in one call; ``None`` otherwise.

    The trial reader's hot path: ``buf`` is a whole event file (mapped), and
    ``start``/``length``/``tag`` come from the index. Checks what
    :func:`tfrecord.read_record` and :func:`decode_tensor` check on the common
    path (the record lies within ``buf``, its length and length CRC, smdebug's
    constant footer, one tensor value with the expected tag) without building
    an error: on ``None`` the caller decodes the slow way, which reports
    precisely what is wrong (or accepts a record with a real payload CRC).

    A canonical record (what smdebug and we write) is scanned in place
    (:func:`tornasole.format.record_scan.scan_tensor_record`) and its value is a
    read-only view of ``buf`` itself: no parse, no copy. Anything else is
    parsed with protobuf (the value then views the parsed record). Callers that
    hand the value out copy it.
    """
    found = scan_tensor_record(buf, start, length, tag)
    if found is not None:
        np_dtype, shape, offset, count = found
        value = np.frombuffer(buf, np_dtype, count, offset)
        return value if len(shape) == 1 else value.reshape(shape)
    return _parse_indexed_tensor(buf, start, length, tag)


def _parse_indexed_tensor(buf: bytes | memoryview, start: int, length: int, tag: str) -> np.ndarray | None:
    """:func:`decode_indexed_tensor` through a protobuf parse (every encoding protobuf accepts)."""
    if length < OVERHEAD or start < 0 or start + length > len(buf):
        return None
    size, len_crc = _HEADER.unpack_from(buf, start)
    stop = start + length - FOOTER_SIZE
    if size + OVERHEAD != length or _FOOTER.unpack_from(buf, stop)[0] != CONSTANT_PAYLOAD_CRC:
        return None
    if len_crc != length_crc(size):
        return None
    ev = _event_class()()
    try:
        ev.ParseFromString(buf[start + HEADER_SIZE : stop])
    except DecodeError:
        return None
    values = ev.summary.value
    if len(values) != 1:
        return None
    val = values[0]
    if val.tag != tag or not val.HasField("tensor"):
        return None
    try:
        return tensor_to_array(val.tensor, None, ev.step, tag)
    except FormatError:
        return None


def _event_class() -> Any:
    global _EVENT
    if _EVENT is None:
        _EVENT = messages().Event
    return _EVENT


_EVENT = None
_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")


def _single_value(payload: bytes | memoryview, path: str | None) -> tuple[Any, Any]:
    """Parse an ``Event`` holding exactly one ``Summary.Value`` with a tensor: ``(event, value)``."""
    ev = _parse(payload, path)
    values = ev.summary.value
    if len(values) != 1 or not values[0].HasField("tensor"):
        raise _not_one_tensor(ev, path)
    return ev, values[0]


def _parse(payload: bytes | memoryview, path: str | None) -> Any:
    ev = messages().Event()
    try:
        ev.ParseFromString(payload)
    except DecodeError as e:
        raise FormatError(f"malformed Event protobuf ({e})", path=path) from None
    return ev


def _not_one_tensor(ev: Any, path: str | None) -> FormatError:
    """The error for an event that does not hold exactly one summary value with a tensor."""
    values = ev.summary.value
    if len(values) != 1:
        msg = f"expected one summary value per event, found {len(values)}"
        return FormatError(msg, path=path, step=ev.step)
    return FormatError("summary value holds no tensor", path=path, step=ev.step, tensor_name=values[0].tag)


def _new_record(tag, value, step, mode, mode_step, wall_time) -> TensorRecord:
    """Build a TensorRecord without the frozen dataclass ``__init__`` (3x faster on the read path)."""
    rec = _object_new(TensorRecord)
    _set_tag(rec, tag)
    _set_value(rec, value)
    _set_step(rec, step)
    _set_mode(rec, mode)
    _set_mode_step(rec, mode_step)
    _set_wall_time(rec, wall_time)
    return rec


_object_new = object.__new__
# Slot descriptors write the fields directly, bypassing the frozen ``__setattr__``.
_set_tag = TensorRecord.tag.__set__
_set_value = TensorRecord.value.__set__
_set_step = TensorRecord.step.__set__
_set_mode = TensorRecord.mode.__set__
_set_mode_step = TensorRecord.mode_step.__set__
_set_wall_time = TensorRecord.wall_time.__set__
_MODES_BY_CONTENT = {str(m.value).encode(): m for m in ModeKeys}

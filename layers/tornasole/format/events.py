"""One tensor record <-> one ``Event`` payload (pure: bytes in, bytes out).

The writer side reproduces smdebug's serialization byte for byte (FORMAT.md
2.2): ``wall_time, step`` (step 0 elided by proto3), one ``Summary.Value`` with
``tag``, a ``TensorProto`` (``dtype``, a shape that is present even when empty,
``Dim.name = f"{tag}_{size}"``, raw little-endian C-order ``tensor_content``) and
``plugin_data`` ``[mode_step, mode]`` as decimal text. Values go through the same
conversion as smdebug's ``make_numpy_array``: an ndarray is kept as is (0-d stays
0-d) and a Python / numpy scalar becomes shape ``[1]``.

The reader returns every dtype as itself (smdebug maps int8 to uint8 and raises
KeyError for int16/uint16/uint32/uint64/complex64; we do neither). Decoding is one
``ParseFromString`` plus one ``np.frombuffer``: values are read-only views of the
parsed content (no extra copy); callers that mutate must copy.

Choices where smdebug has no behaviour (it raises) and ours is documented here:

* bfloat16 (and other ml_dtypes floats numpy can cast) is written as float32,
  ``longdouble`` as float64, ``clongdouble`` as complex128.
* String arrays (numpy kinds U, S, O) are written as ``string_val`` with dtype 0
  and the array's own shape. 1-D arrays are exactly what smdebug writes; 0-d and
  N-d string arrays (which smdebug cannot write, and whose shape its reader
  rejects) are written flattened in C order with their true shape, and our reader
  reshapes them. Strings read back as a numpy ``str`` array (``bytes`` if a value
  is not UTF-8).
* Size-0 arrays are written like smdebug (their dtype, no content); we read them
  back as an empty array of that dtype and shape (smdebug's reader raises).
* Reading also accepts TF's value lists (``float_val`` ...) and ``DT_BFLOAT16``
  content (returned as float32), which smdebug never writes.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from tornasole.exceptions import FormatError, TornasoleValueError
from tornasole.format.proto import messages
from tornasole.format.tfrecord import frame
from tornasole.modes import ModeKeys

__all__ = [
    "TensorRecord",
    "encode_event",
    "encode_record",
    "decode_event",
    "to_array",
    "DT_INVALID",
    "DT_STRING",
    "DT_BFLOAT16",
]

DT_INVALID = 0
DT_STRING = 7
DT_BFLOAT16 = 14
MODE_STEP_PLUGIN = "mode_step"
MODE_PLUGIN = "mode"

# (numpy kind, itemsize) -> TensorFlow DataType enum (FORMAT.md 2.3).
_KIND_TO_DT = {
    ("f", 4): 1, ("f", 8): 2, ("f", 2): 19,
    ("i", 4): 3, ("i", 8): 9, ("i", 2): 5, ("i", 1): 6,
    ("u", 1): 4, ("u", 2): 17, ("u", 4): 22, ("u", 8): 23,
    ("c", 8): 8, ("c", 16): 18, ("b", 1): 10,
}  # fmt: skip
_DT_TO_NP = {
    1: np.dtype("<f4"), 2: np.dtype("<f8"), 19: np.dtype("<f2"),
    3: np.dtype("<i4"), 9: np.dtype("<i8"), 5: np.dtype("<i2"), 6: np.dtype("i1"),
    4: np.dtype("u1"), 17: np.dtype("<u2"), 22: np.dtype("<u4"), 23: np.dtype("<u8"),
    8: np.dtype("<c8"), 18: np.dtype("<c16"), 10: np.dtype("?"),
}  # fmt: skip
_BIG_ENDIAN_HOST = sys.byteorder == "big"
_BF16 = np.dtype("<u2")


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


def to_array(value: Any) -> np.ndarray:
    """Convert a value the way smdebug's writer does before encoding.

    ndarrays pass through (0-d stays 0-d); Python and numpy scalars become shape
    ``[1]``; lists and tuples go through ``np.asarray``; a torch tensor is
    detached and moved to CPU (bfloat16 becomes float32).

    Examples
    --------
    >>> to_array(2.5).shape, to_array(np.float32(1)).dtype, to_array(np.zeros(())).shape
    ((1,), dtype('float32'), ())
    """
    if isinstance(value, np.ndarray):
        return value
    if np.isscalar(value):
        return np.array([value])
    if hasattr(value, "detach") and hasattr(value, "float"):  # a torch tensor, without importing torch
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()  # numpy has no bfloat16: saved as float32
        return value.numpy()
    return np.asarray(value)


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
        The value; converted with :func:`to_array`.
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
    if mode is None:
        mode = ModeKeys.GLOBAL
    if mode_step is None:
        mode_step = step
    arr = _normalize(to_array(array), tag)
    m = messages()
    ev = m.Event(wall_time=time.time() if wall_time is None else wall_time, step=step)
    val = ev.summary.value.add(tag=tag)
    tensor = val.tensor
    shape = tensor.tensor_shape
    shape.SetInParent()
    for size in arr.shape:
        shape.dim.add(size=size, name=f"{tag}_{size}")
    if arr.dtype.kind in "USO":
        tensor.string_val.extend(_string_bytes(arr))
    else:
        tensor.dtype = _KIND_TO_DT[(arr.dtype.kind, arr.dtype.itemsize)]
        tensor.tensor_content = arr.tobytes()
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
    ev = messages().Event()
    try:
        ev.ParseFromString(payload)
    except DecodeError as e:
        raise FormatError(f"malformed Event protobuf ({e})", path=path) from None
    step = ev.step
    values = ev.summary.value
    if len(values) != 1:
        raise FormatError(f"expected one summary value per event, found {len(values)}", path=path, step=step)
    val = values[0]
    tag = val.tag
    if not val.HasField("tensor"):
        raise FormatError("summary value holds no tensor", path=path, step=step, tensor_name=tag)
    array = _tensor_to_array(val.tensor, path, step, tag)
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


def _normalize(arr: np.ndarray, tag: str) -> np.ndarray:
    """Map any input dtype onto one the format can carry, little-endian."""
    dt = arr.dtype
    if dt.kind in "USO":
        return arr
    key = (dt.kind, dt.itemsize)
    if key not in _KIND_TO_DT:
        if dt.kind == "f" and dt.itemsize > 8:
            target = np.float64
        elif dt.kind == "c" and dt.itemsize > 16:
            target = np.complex128
        elif dt.kind in "mMV" and dt.name != "bfloat16" and not dt.name.startswith("float"):
            raise TornasoleValueError(f"tensor {tag!r}: dtype {dt} cannot be saved")
        else:
            target = np.float32  # bfloat16 / float8 (ml_dtypes) and other float-castable types
        try:
            return arr.astype(target)
        except (TypeError, ValueError) as e:
            raise TornasoleValueError(f"tensor {tag!r}: dtype {dt} cannot be saved ({e})") from None
    if dt.byteorder == ">" or (dt.byteorder == "=" and _BIG_ENDIAN_HOST):
        return arr.astype(dt.newbyteorder("<"))
    return arr


def _string_bytes(arr: np.ndarray) -> list[bytes]:
    out = []
    for item in arr.reshape(-1).tolist():
        if isinstance(item, bytes):
            out.append(item)
        else:
            out.append(str(item).encode("utf-8"))
    return out


def _tensor_to_array(tensor: Any, path: str | None, step: int, tag: str) -> np.ndarray:
    shape = tuple([d.size for d in tensor.tensor_shape.dim])
    np_dtype = _DT_TO_NP.get(tensor.dtype)
    if np_dtype is not None:  # fast path: the common, well-formed numeric record
        content = tensor.tensor_content
        if (
            content
            and len(content) == math.prod(shape) * np_dtype.itemsize
            and (not shape or min(shape) >= 0)
        ):
            return np.frombuffer(content, dtype=np_dtype).reshape(shape)
    return _other_tensor(tensor, shape, np_dtype, path, step, tag)


def _other_tensor(tensor, shape, np_dtype, path, step, tag) -> np.ndarray:
    """Strings, bfloat16, empty arrays, value lists, and every error."""
    if shape and min(shape) < 0:
        raise FormatError(f"negative dimension in shape {list(shape)}", path=path, step=step, tensor_name=tag)
    count = math.prod(shape)
    dt = tensor.dtype
    if np_dtype is None:
        if dt in (DT_INVALID, DT_STRING):
            return _strings(tensor.string_val, shape, count, path, step, tag)
        if dt == DT_BFLOAT16:
            bits = _numeric(tensor.tensor_content, _BF16, shape, count, path, step, tag)
            return (bits.astype("<u4") << 16).view("<f4")
        raise FormatError(f"unknown dtype enum {dt}", path=path, step=step, tensor_name=tag)
    content = tensor.tensor_content
    if content or count == 0:
        return _numeric(content, np_dtype, shape, count, path, step, tag)
    return _value_list(tensor, np_dtype, shape, count, path, step, tag)


def _numeric(content, np_dtype, shape, count, path, step, tag) -> np.ndarray:
    if len(content) != count * np_dtype.itemsize:
        raise FormatError(
            f"tensor_content has {len(content)} bytes, shape {list(shape)} of {np_dtype} needs "
            f"{count * np_dtype.itemsize}",
            path=path,
            step=step,
            tensor_name=tag,
        )
    return np.frombuffer(content, dtype=np_dtype).reshape(shape)


def _strings(string_val, shape, count, path, step, tag) -> np.ndarray:
    if len(string_val) != count:
        raise FormatError(
            f"{len(string_val)} string values for shape {list(shape)}", path=path, step=step, tensor_name=tag
        )
    raw = list(string_val)
    try:
        return np.array([s.decode("utf-8") for s in raw], dtype=str).reshape(shape)
    except UnicodeDecodeError:
        return np.array(raw, dtype=bytes).reshape(shape)


def _value_list(tensor, np_dtype, shape, count, path, step, tag) -> np.ndarray:
    """TF's ``*_val`` encodings: one value per element, or one value repeated."""
    kind = np_dtype.kind
    if kind == "f" and np_dtype.itemsize == 2:
        vals = np.array(tensor.half_val, dtype="<u2").view("<f2")
    elif kind == "f":
        vals = np.array(tensor.float_val if np_dtype.itemsize == 4 else tensor.double_val, dtype=np_dtype)
    elif kind == "b":
        vals = np.array(tensor.bool_val, dtype=np_dtype)
    elif kind in "iu" and np_dtype.itemsize == 8:
        vals = np.array(tensor.int64_val, dtype=np.int64).astype(np_dtype)
    elif kind in "iu":
        vals = np.array(tensor.int_val, dtype=np.int64).astype(np_dtype)
    else:
        vals = np.empty(0, np_dtype)
    if len(vals) == count:
        return vals.reshape(shape)
    if len(vals) >= 1 and len(vals) < count:
        return np.concatenate([vals, np.full(count - len(vals), vals[-1], np_dtype)]).reshape(shape)
    raise FormatError(
        f"no tensor_content and {len(vals)} listed values for shape {list(shape)}",
        path=path,
        step=step,
        tensor_name=tag,
    )

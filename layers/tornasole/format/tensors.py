"""TensorProto <-> numpy: the dtype table of FORMAT.md 2.3, strings, odd dtypes.

The reader returns every dtype as itself: smdebug maps DT_INT8 to uint8 and
raises KeyError for int16/uint16/uint32/uint64/complex64; we do neither. The
writer's dtype enums and ``tensor_content`` bytes are exactly smdebug's.

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
from typing import Any

import numpy as np

from tornasole.exceptions import FormatError, TornasoleValueError

__all__ = ["to_array", "fill_tensor_proto", "tensor_to_array", "DT_INVALID", "DT_STRING", "DT_BFLOAT16"]

DT_INVALID = 0
DT_STRING = 7
DT_BFLOAT16 = 14

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


def fill_tensor_proto(tensor: Any, value: Any, tag: str) -> None:
    """Fill an empty ``TensorProto`` message with ``value`` exactly as smdebug would.

    The shape sub-message is always present (``12 00`` for 0-d), every ``Dim.name``
    is ``f"{tag}_{size}"``, numbers go to ``tensor_content`` (little-endian, C
    order), strings to ``string_val`` with dtype left 0.

    Raises
    ------
    TornasoleValueError
        The dtype cannot be represented (e.g. datetime64), naming the tag.
    """
    arr = _normalize(to_array(value), tag)
    shape = tensor.tensor_shape
    shape.SetInParent()
    for size in arr.shape:
        shape.dim.add(size=size, name=f"{tag}_{size}")
    if arr.dtype.kind in "USO":
        tensor.string_val.extend(_string_bytes(arr))
    else:
        tensor.dtype = _KIND_TO_DT[(arr.dtype.kind, arr.dtype.itemsize)]
        tensor.tensor_content = arr.tobytes()


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


def tensor_to_array(tensor: Any, path: str | None, step: int, tag: str) -> np.ndarray:
    """Decode a parsed ``TensorProto``; errors name ``path``, ``step`` and ``tag``.

    Raises
    ------
    FormatError
        Unknown dtype enum, content length not matching the shape, a negative
        dimension, or string / value-list counts not matching the shape.
    """
    dims = tensor.tensor_shape.dim
    np_dtype = _DT_TO_NP.get(tensor.dtype)
    if np_dtype is not None:  # fast path: the common, well-formed numeric record
        content = tensor.tensor_content
        if len(dims) == 1:  # most saved tensors are flat or flattened: no shape tuple, no reshape
            size = dims[0].size
            if content and size > 0 and len(content) == size * np_dtype.itemsize:
                return np.frombuffer(content, dtype=np_dtype)
            shape: tuple[int, ...] = (size,)
        else:
            shape = tuple([d.size for d in dims])
            if (
                content
                and len(content) == math.prod(shape) * np_dtype.itemsize
                and (not shape or min(shape) >= 0)
            ):
                return np.frombuffer(content, dtype=np_dtype).reshape(shape)
    else:
        shape = tuple([d.size for d in dims])
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

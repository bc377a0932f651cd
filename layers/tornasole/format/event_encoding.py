"""Encoding a numeric tensor's ``Event`` straight to bytes: the writer's fast path.

A hook's writer thread encodes every saved value. Building the ``Event`` as
protobuf messages (``Event`` -> ``Summary.Value`` -> ``TensorProto`` ->
``Dim`` and two ``PluginData``) costs five sub-message allocations a record;
for the many small values of a saved step (XGBoost's fifty feature
importances, a Keras model's scalars) that dominates the step's cost. This
module writes the same wire bytes directly, proto3 rules included (zero
scalars and empty bytes left out, sub-messages in field-number order), and
caches the part that depends only on the tag, dtype and shape.

:func:`encode_numeric_event` returns ``None`` where the generic encoder must be
used (strings, a zero or negative step or wall time); tests compare both
encoders byte for byte over dtypes, shapes, steps and modes.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from tornasole.format.tensors import _KIND_TO_DT, _normalize, to_array

__all__ = ["encode_numeric_event"]

_DOUBLE = struct.Struct("<d")
_MODE_STEP_NAME = b"\x0a\x09mode_step"  # PluginData.plugin_name (field 1) = "mode_step"
_MODE_NAME = b"\x0a\x04mode"
_CACHE_LIMIT = 4096
# (tag, dtype, shape) -> (Value.tag field, TensorProto.dtype field, TensorProto.tensor_shape field)
_prefixes: dict[tuple[str, np.dtype, tuple[int, ...]], tuple[bytes, bytes, bytes]] = {}


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(key: int, payload: bytes) -> bytes:
    """A length-delimited field: key byte, length, payload."""
    size = len(payload)
    if size < 0x80:
        return bytes((key, size)) + payload
    return b"".join((bytes((key,)), _varint(size), payload))


def _prefix(tag: str, dtype: np.dtype, shape: tuple[int, ...]) -> tuple[bytes, bytes, bytes]:
    key = (tag, dtype, shape)
    cached = _prefixes.get(key)
    if cached is None:
        dims = []
        for size in shape:
            dim = (b"\x08" + _varint(size) if size else b"") + _field(0x12, f"{tag}_{size}".encode())
            dims.append(_field(0x12, dim))  # TensorShapeProto.dim (field 2)
        dtype_enum = _KIND_TO_DT[(dtype.kind, dtype.itemsize)]
        cached = (
            _field(0x0A, tag.encode()),  # Summary.Value.tag (field 1)
            b"\x08" + _varint(dtype_enum),  # TensorProto.dtype (field 1)
            _field(0x12, b"".join(dims)),  # TensorProto.tensor_shape (field 2), present even when empty
        )
        if len(_prefixes) >= _CACHE_LIMIT:
            _prefixes.clear()
        _prefixes[key] = cached
    return cached


def encode_numeric_event(
    tag: str, value: Any, *, step: int, mode_value: int, mode_step: int, wall_time: float
) -> bytes | None:
    """The serialized ``Event`` of one numeric tensor, or ``None`` (use the protobuf encoder).

    Byte-identical to :func:`tornasole.format.events.encode_event` for the
    values it accepts.
    """
    if step < 0 or not wall_time:
        return None
    arr = value if type(value) is np.ndarray else to_array(value)
    dtype = arr.dtype
    if dtype.kind in "USO":
        return None
    if not dtype.isnative or (dtype.kind, dtype.itemsize) not in _KIND_TO_DT:
        arr = _normalize(arr, tag)
    tag_field, dtype_field, shape_field = _prefix(tag, arr.dtype, arr.shape)
    content = arr.tobytes()
    tensor = dtype_field + shape_field + (_field(0x22, content) if content else b"")
    mode_step_data = str(mode_step).encode()
    mode_data = str(mode_value).encode()
    # SummaryMetadata: two PluginData entries (field 1), each plugin_name (1) and content (2); all short
    metadata = b"".join(
        (
            bytes((0x0A, 13 + len(mode_step_data))),
            _MODE_STEP_NAME,
            bytes((0x12, len(mode_step_data))),
            mode_step_data,
            bytes((0x0A, 8 + len(mode_data))),
            _MODE_NAME,
            bytes((0x12, len(mode_data))),
            mode_data,
        )
    )
    summary_value = b"".join((tag_field, _field(0x42, tensor), bytes((0x4A, len(metadata))), metadata))
    head = b"\x09" + _DOUBLE.pack(wall_time) + (b"\x10" + _varint(step) if step else b"")
    return head + _field(0x2A, _field(0x0A, summary_value))

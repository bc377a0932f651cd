"""Encoding a numeric tensor's ``Event`` straight to bytes: the writer's fast path.

A hook's writer thread encodes every saved value. Building the ``Event`` as
protobuf messages (``Event`` -> ``Summary.Value`` -> ``TensorProto`` ->
``Dim`` and two ``PluginData``) costs five sub-message allocations a record;
for the many small values of a saved step (XGBoost's fifty feature
importances, a Keras model's scalars) that dominates the step's cost. This
module writes the same wire bytes directly, proto3 rules included (zero
scalars and empty bytes left out, sub-messages in field-number order), and
caches what depends only on the tag, dtype and shape (everything before the
content but the wall time and step), the mode metadata and the time of the
latest record (a step's records share them), and each record size's TFRecord
header: a record is then one ``tobytes`` and one ``join``.

:func:`encode_numeric_event` returns ``None`` where the generic encoder must be
used (strings, a zero or negative step or wall time); tests compare both
encoders byte for byte over dtypes, shapes, steps and modes.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from tornasole.format.crc import CONSTANT_PAYLOAD_CRC, masked_crc32c
from tornasole.format.tensors import _KIND_TO_DT, _normalize, to_array

__all__ = ["encode_numeric_event", "encode_numeric_record", "numeric_record", "numeric_records"]

_DOUBLE = struct.Struct("<d")
_LEN = struct.Struct("<Q")
_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I").pack(CONSTANT_PAYLOAD_CRC)
_MODE_STEP_NAME = b"\x0a\x09mode_step"  # PluginData.plugin_name (field 1) = "mode_step"
_MODE_NAME = b"\x0a\x04mode"
_CACHE_LIMIT = 4096
# (tag, dtype, shape, metadata length) -> (the bytes from Event.summary's key to tensor_content's length,
# their count plus the content's and the metadata field's: the Event's size after wall_time and step)
_bodies: dict[tuple[str, np.dtype, tuple[int, ...], int], tuple[bytes, int]] = {}
# the latest (wall_time, step) and (mode_step, mode) seen, with their bytes: a step's records share them
# (one tuple each, replaced whole: writer threads of several hooks may share them)
_last_head: list[tuple[Any, Any, bytes]] = [(None, None, b"")]
_last_metadata: list[tuple[Any, Any, bytes]] = [(None, None, b"")]
_record_headers: dict[int, bytes] = {}  # payload size -> TFRecord length + masked length CRC


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


def _body(tag: str, dtype: np.dtype, shape: tuple[int, ...], metadata_size: int) -> tuple[bytes, int]:
    """What precedes a tensor's content in its Event (after wall_time and step), and the Event's
    size from there on: they depend only on the tag, dtype, shape and the mode metadata's size."""
    key = (tag, dtype, shape, metadata_size)
    cached = _bodies.get(key)
    if cached is None:
        dims = []
        for size in shape:
            dim = (b"\x08" + _varint(size) if size else b"") + _field(0x12, f"{tag}_{size}".encode())
            dims.append(_field(0x12, dim))  # TensorShapeProto.dim (field 2)
        nbytes = dtype.itemsize * math.prod(shape)
        tensor_head = b"".join(
            (
                b"\x08" + _varint(_KIND_TO_DT[(dtype.kind, dtype.itemsize)]),  # TensorProto.dtype (1)
                _field(0x12, b"".join(dims)),  # TensorProto.tensor_shape (2), present even when empty
                b"\x22" + _varint(nbytes) if nbytes else b"",  # TensorProto.tensor_content (4)
            )
        )
        tensor_size = len(tensor_head) + nbytes
        value_head = b"".join(
            (_field(0x0A, tag.encode()), b"\x42", _varint(tensor_size), tensor_head)  # Value.tag, .tensor
        )
        value_size = len(value_head) + nbytes + 2 + metadata_size  # + Value.metadata (field 9)
        summary_size = 1 + len(_varint(value_size)) + value_size  # Summary.value (field 1)
        head = b"".join((b"\x2a", _varint(summary_size), b"\x0a", _varint(value_size), value_head))
        cached = (head, len(head) + nbytes + 2 + metadata_size)  # Event.summary (field 5)
        if len(_bodies) >= _CACHE_LIMIT:
            _bodies.clear()
        _bodies[key] = cached
    return cached


def _metadata(mode_step: int, mode_value: int) -> bytes:
    """Value.metadata (field 9): SummaryMetadata's two PluginData, ``mode_step`` and ``mode`` as text."""
    last = _last_metadata[0]
    if last[0] == mode_step and last[1] == mode_value and type(mode_step) is int:
        return last[2]
    mode_step_data = str(mode_step).encode()
    mode_data = str(mode_value).encode()
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
    field = bytes((0x4A, len(metadata))) + metadata  # short: a mode step has at most 20 characters
    _last_metadata[0] = (mode_step, mode_value, field)
    return field


def _head(wall_time: float, step: int) -> bytes:
    """Event.wall_time (field 1) and Event.step (field 2, left out when 0)."""
    last = _last_head[0]
    if last[0] == wall_time and last[1] == step:
        return last[2]
    head = b"\x09" + _DOUBLE.pack(wall_time) + (b"\x10" + _varint(step) if step else b"")
    _last_head[0] = (wall_time, step, head)
    return head


def _parts(tag: str, value: Any, step: int, mode_value: int, mode_step: int, wall_time: float):
    if step < 0 or not wall_time:
        return None
    arr = value if type(value) is np.ndarray else to_array(value)
    dtype = arr.dtype
    if dtype.kind in "USO":
        return None
    if not dtype.isnative or (dtype.kind, dtype.itemsize) not in _KIND_TO_DT:
        arr = _normalize(arr, tag)
        dtype = arr.dtype
    metadata = _metadata(mode_step, mode_value)
    body, body_size = _body(tag, dtype, arr.shape, len(metadata) - 2)
    return _head(wall_time, step), body, body_size, arr.tobytes(), metadata


def encode_numeric_event(
    tag: str, value: Any, *, step: int, mode_value: int, mode_step: int, wall_time: float
) -> bytes | None:
    """The serialized ``Event`` of one numeric tensor, or ``None`` (use the protobuf encoder).

    Byte-identical to :func:`tornasole.format.event_records.encode_event` for the
    values it accepts.
    """
    parts = _parts(tag, value, step, mode_value, mode_step, wall_time)
    if parts is None:
        return None
    head, body, _, content, metadata = parts
    return b"".join((head, body, content, metadata))


def encode_numeric_record(
    tag: str, value: Any, *, step: int, mode_value: int, mode_step: int, wall_time: float
) -> bytes | None:
    """:func:`encode_numeric_event` in TFRecord framing (constant footer), or ``None``."""
    return numeric_record(tag, value, step, mode_value, mode_step, wall_time)


def numeric_record(
    tag: str, value: Any, step: int, mode_value: int, mode_step: int, wall_time: float
) -> bytes | None:
    """:func:`encode_numeric_record` with positional arguments: the writer's per-record call.

    Every part but the content comes from a cache (body by tag, dtype and shape; the last
    wall_time/step head and mode metadata; the TFRecord header by size).
    """
    parts = _parts(tag, value, step, mode_value, mode_step, wall_time)
    if parts is None:
        return None
    head, body, body_size, content, metadata = parts
    size = len(head) + body_size
    header = _record_headers.get(size)
    if header is None:
        if len(_record_headers) >= _CACHE_LIMIT:
            _record_headers.clear()
        header = _record_headers[size] = _HEADER.pack(size, masked_crc32c(_LEN.pack(size)))
    return b"".join((header, head, body, content, metadata, _FOOTER))


def numeric_records(items: Any, step: int, mode_value: int, mode_step: int) -> list[bytes | None]:
    """:func:`numeric_record` of each ``(tag, value, wall_time)`` of ``items``, in order, sharing a
    step and mode: the metadata looked up once and, for native numeric arrays, the parts taken from
    their caches in line (a saved step's tens of small values; the same bytes, ``None`` where the
    generic encoder must be used)."""
    out: list[bytes | None] = []
    if step < 0:
        return [None] * len(items)
    metadata = _metadata(mode_step, mode_value)
    metadata_size = len(metadata) - 2
    bodies, headers, last_time, head = _bodies, _record_headers, None, b""
    for tag, value, wall_time in items:
        if type(value) is not np.ndarray or not wall_time or value.dtype not in _FAST_DTYPES:
            out.append(numeric_record(tag, value, step, mode_value, mode_step, wall_time))
            continue
        if wall_time != last_time:
            head, last_time = _head(wall_time, step), wall_time
        body = bodies.get((tag, value.dtype, value.shape, metadata_size))
        if body is None:
            body = _body(tag, value.dtype, value.shape, metadata_size)
        size = len(head) + body[1]
        header = headers.get(size)
        if header is None:
            if len(headers) >= _CACHE_LIMIT:
                headers.clear()
            header = headers[size] = _HEADER.pack(size, masked_crc32c(_LEN.pack(size)))
        out.append(b"".join((header, head, body[0], value.tobytes(), metadata, _FOOTER)))
    return out


# the native-order dtypes _parts writes as they are (no _normalize): one set lookup per value
_FAST_DTYPES = frozenset(np.dtype(f"{kind}{size}") for kind, size in _KIND_TO_DT)

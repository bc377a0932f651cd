"""Where the value of a tensor record lies, found without a protobuf message.

The trial reader's hot path. An event record written by smdebug (or by us) is
``Event{wall_time, step, summary{value{tag, tensor{dtype, tensor_shape{dim*},
tensor_content}, metadata{plugin_data*}}}}``, serialized in field-number order
(FORMAT.md 2.2). :func:`scan_tensor_record` walks those bytes in place with a
small varint scanner and returns the dtype, the shape and where
``tensor_content`` lies, so the caller can make the value with one
``np.frombuffer`` of the mapped event file: no parsed message, no intermediate
``bytes`` of the content.

It is deliberately narrow. It answers only for a record laid out exactly as
that canonical serialization, every field at most once, a numeric dtype with
content whose length matches the shape, the expected tag; for anything else
(value lists, strings, bfloat16, empty arrays, unknown or repeated fields,
overlong varints, invalid UTF-8, a footer that is not smdebug's constant...)
it returns ``None`` and the caller parses with protobuf, which decides, and
which reports errors. So a value it returns is the value protobuf would have
decoded, and every error is the one the protobuf path raises.

Input is hostile: every length is checked against the end of its enclosing
message, every message must end exactly where its length says, and reading
past the buffer is caught (``None``). The framing checks are those of
:func:`tornasole.format.tfrecord.read_record` on an indexed record (the length,
its CRC, the constant footer).
"""

from __future__ import annotations

import struct

import numpy as np

from tornasole.format.crc import CONSTANT_PAYLOAD_CRC
from tornasole.format.tensors import _DT_TO_NP
from tornasole.format.tfrecord import FOOTER_SIZE, HEADER_SIZE, OVERHEAD, length_crc

__all__ = ["scan_tensor_record"]

_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")

# Field keys ((number << 3) | wire type), one byte each.
_WALL_TIME = 0x09  # Event.wall_time, fixed64
_STEP = 0x10  # Event.step, varint
_SUMMARY = 0x2A  # Event.summary, length-delimited
_VALUE = 0x0A  # Summary.value
_TAG = 0x0A  # Summary.Value.tag
_TENSOR = 0x42  # Summary.Value.tensor
_METADATA = 0x4A  # Summary.Value.metadata
_DTYPE = 0x08  # TensorProto.dtype
_SHAPE = 0x12  # TensorProto.tensor_shape
_CONTENT = 0x22  # TensorProto.tensor_content
_DIM = 0x12  # TensorShapeProto.dim
_DIM_SIZE = 0x08  # Dim.size
_DIM_NAME = 0x12  # Dim.name
_PLUGIN_DATA = 0x0A  # SummaryMetadata.plugin_data
_PLUGIN_NAME = 0x0A  # PluginData.plugin_name
_PLUGIN_CONTENT = 0x12  # PluginData.content

#: Longest varint accepted (9 bytes: 63 bits); longer ones (negative int64s) go to protobuf.
_MAX_SHIFT = 56


def _varint(buf, pos: int, first: int) -> tuple[int, int]:
    """The rest of a varint whose first byte ``first`` (>= 0x80) was at ``pos - 1``; -1 if too long."""
    result = first & 0x7F
    shift = 7
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > _MAX_SHIFT:
            return -1, pos


def scan_tensor_record(
    buf, start: int, length: int, tag: str
) -> tuple[np.dtype, tuple[int, ...], int, int] | None:
    """``(dtype, shape, offset, count)`` of the value of the record at ``buf[start:start+length]``.

    Parameters
    ----------
    buf : bytes-like
        Supports ``len``, slicing and the buffer protocol (a whole event file, mapped).
    start, length : int
        The record (TFRecord framing included), as an index entry gives it.
    tag : str
        The tensor name the index expects.

    Returns
    -------
    tuple or None
        ``np.frombuffer(buf, dtype, count, offset).reshape(shape)`` is the value;
        ``None`` when the record is not the canonical well-formed one (decode it
        with protobuf, which says what is wrong or handles the rarer encodings).

    Examples
    --------
    >>> import numpy as np
    >>> from tornasole.format.events import encode_record
    >>> rec = encode_record("w", np.float32([[1, 2]]), step=3, mode=None, mode_step=None, wall_time=1.0)
    >>> dt, shape, off, n = scan_tensor_record(rec, 0, len(rec), "w")
    >>> (dt.name, shape, n, np.frombuffer(rec, dt, n, offset=off).tolist())
    ('float32', (1, 2), 2, [1.0, 2.0])
    """
    if length < OVERHEAD or start < 0 or start + length > len(buf):
        return None
    size, len_crc = _HEADER.unpack_from(buf, start)
    end = start + length - FOOTER_SIZE
    if size + OVERHEAD != length or _FOOTER.unpack_from(buf, end)[0] != CONSTANT_PAYLOAD_CRC:
        return None
    if len_crc != length_crc(size):
        return None
    base = start + HEADER_SIZE
    # The fields before the content are a few dozen bytes: scan a copy of them (indexing bytes
    # is several times cheaper than indexing a mapping).
    layout = _LAYOUTS.get(tag)
    found = None
    if layout is not None:  # the common case, inline: wall time, step, two lengths, then the layout
        prefix, np_dtype, shape, count, content_len, head_bytes = layout
        h = bytes(buf[base : base + head_bytes if size > head_bytes else end])
        try:
            pos = _value_start(h, size)
        except IndexError:
            pos = -1
        if pos >= 0 and h.startswith(prefix, pos):
            offset = pos + len(prefix)
            tensor_end = offset + content_len
            if tensor_end <= size:
                found = np_dtype, shape, offset, count, tensor_end
    else:
        h = bytes(buf[base : base + _HEAD_BYTES if size > _HEAD_BYTES else end])
    if found is None:
        found = _scan_payload(buf, base, end, h, tag)
        if found is None:
            return None
        np_dtype, shape, offset, count, tensor_end = found
    if tensor_end != size:  # what follows the tensor: metadata, once, up to the end
        tail = buf[base + tensor_end : end]  # a read-only view hashes and compares as its bytes
        if tail not in _VALID_TAILS:
            tail = bytes(tail)
            try:
                if not _metadata_ok(tail):
                    return None
            except IndexError:
                return None
            if len(_VALID_TAILS) >= _MAX_LAYOUTS:
                _VALID_TAILS.clear()
            _VALID_TAILS.add(tail)
    return np_dtype, shape, base + offset, count


#: How many payload bytes are copied for the scan of the fields before the content.
_HEAD_BYTES = 256
#: At most what comes before the Summary.Value's tag: wall time (9), step (11), two keys and lengths.
_PREFIX_BYTES = 9 + 11 + 2 * 6
#: tag -> (the Summary.Value bytes from the tag up to the content, validated once; what they say).
#: A tensor's records differ in wall time, step and mode step, not there, unless its shape changes.
_LAYOUTS: dict[str, tuple[bytes, np.dtype, tuple[int, ...], int, int, int]] = {}
_MAX_LAYOUTS = 1 << 14
#: Metadata bytes already validated: every tensor of a step carries the same (mode step, mode).
_VALID_TAILS: set[bytes] = set()


def _value_start(h: bytes, end: int) -> int:
    """Where Summary.Value's fields start in ``h`` (Event{wall_time?, step?, summary{value{...}}}), or -1."""
    pos = 0
    key = h[0]
    if key == _WALL_TIME:
        pos = 9
        key = h[9]
    if key == _STEP:
        b = h[pos + 1]
        pos += 2
        if b >= 0x80:
            b, pos = _varint(h, pos, b)
            if b < 0:
                return -1
        key = h[pos]
    if key != _SUMMARY:
        return -1
    n = h[pos + 1]
    pos += 2
    if n >= 0x80:  # lengths of a few KB: two-byte varints, decoded here
        b = h[pos]
        if b < 0x80:
            n = (n & 0x7F) | (b << 7)
            pos += 1
        else:
            n, pos = _varint(h, pos, n)
    if pos + n != end or h[pos] != _VALUE:
        return -1
    n = h[pos + 1]
    pos += 2
    if n >= 0x80:
        b = h[pos]
        if b < 0x80:
            n = (n & 0x7F) | (b << 7)
            pos += 1
        else:
            n, pos = _varint(h, pos, n)
    if pos + n != end:
        return -1
    return pos


def _scan_payload(buf, base: int, end: int, head: bytes, tag: str):
    """:func:`_scan_event` over ``head``, or over the whole payload if its fields run past ``head``."""
    try:
        tag_bytes = tag.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no valid record carries it, protobuf decides
        return None
    try:
        return _scan_event(head, end - base, tag, tag_bytes)
    except IndexError:  # ran past the copied head (or a varint past the record's end)
        if len(head) == end - base:
            return None
    try:
        return _scan_event(bytes(buf[base:end]), end - base, tag, tag_bytes)
    except IndexError:
        return None


def _scan_event(h: bytes, end: int, tag: str, tag_bytes: bytes):
    """Event -> Summary -> Summary.Value up to the content, field by field, in ``h`` (the payload's start).

    Every message must end exactly where its length says; returns
    ``(dtype, shape, content offset, count, tensor end)`` or ``None``. A
    record that scans is remembered as its tag's layout.
    """
    pos = 0
    key = h[0] if end else -1
    if key == _WALL_TIME:
        pos = 9
        key = h[pos] if pos < end else -1
    if key == _STEP:
        b = h[pos + 1]
        pos += 2
        if b >= 0x80:
            b, pos = _varint(h, pos, b)
            if b < 0:
                return None
        key = h[pos] if pos < end else -1
    if key != _SUMMARY:
        return None
    # Summary: one field, `value`, once; it and the Summary end where the Event ends.
    n = h[pos + 1]
    pos += 2
    if n >= 0x80:
        n, pos = _varint(h, pos, n)
    if pos + n != end or n <= 0 or h[pos] != _VALUE:
        return None
    n = h[pos + 1]
    pos += 2
    if n >= 0x80:
        n, pos = _varint(h, pos, n)
    if pos + n != end or n <= 0:
        return None
    found = _scan_value(h, pos, end, tag_bytes)
    if found is not None:
        if len(_LAYOUTS) >= _MAX_LAYOUTS:
            _LAYOUTS.clear()
        np_dtype, shape, offset, count, tensor_end = found
        prefix = h[pos:offset]
        _LAYOUTS[tag] = (prefix, np_dtype, shape, count, tensor_end - offset, len(prefix) + _PREFIX_BYTES)
    return found


def _scan_value(h: bytes, pos: int, end: int, tag: bytes):
    """Summary.Value's tag and TensorProto (dtype, tensor_shape?, tensor_content), field by field."""
    if h[pos] != _TAG:
        return None
    n = h[pos + 1]
    pos += 2
    if n >= 0x80:
        n, pos = _varint(h, pos, n)
    if n != len(tag) or h[pos : pos + n] != tag:
        return None
    pos += n
    if pos >= end or h[pos] != _TENSOR:
        return None
    n = h[pos + 1]
    pos += 2
    if n >= 0x80:
        n, pos = _varint(h, pos, n)
    tensor_end = pos + n
    if n <= 0 or tensor_end > end or h[pos] != _DTYPE:
        return None
    # TensorProto{dtype, tensor_shape?, tensor_content} exactly filling [pos, tensor_end).
    np_dtype = _DT_TO_NP.get(h[pos + 1])  # enums are one-byte varints; others are not in the table
    if np_dtype is None:
        return None
    pos += 2
    shape: tuple[int, ...] | None = ()
    key = h[pos] if pos < tensor_end else -1
    if key == _SHAPE:
        n = h[pos + 1]
        pos += 2
        if n >= 0x80:
            n, pos = _varint(h, pos, n)
        shape_end = pos + n
        if n < 0 or shape_end >= tensor_end:
            return None
        shape = _scan_shape(h, pos, shape_end)
        if shape is None:
            return None
        pos = shape_end
        key = h[pos]
    if key != _CONTENT:
        return None
    n = h[pos + 1]
    pos += 2
    if n >= 0x80:
        n, pos = _varint(h, pos, n)
    if n <= 0 or pos + n != tensor_end:
        return None
    count = 1
    for d in shape:
        count *= d
    if count * np_dtype.itemsize != n:
        return None
    return np_dtype, shape, pos, count, tensor_end


def _scan_shape(h: bytes, pos: int, end: int) -> tuple[int, ...] | None:
    """The sizes of TensorShapeProto's dims (each ``{size?, name?}``, names valid UTF-8)."""
    dims = []
    while pos < end:
        if h[pos] != _DIM:
            return None
        n = h[pos + 1]
        pos += 2
        if n >= 0x80:
            n, pos = _varint(h, pos, n)
        dim_end = pos + n
        if n < 0 or dim_end > end:
            return None
        size = 0
        if pos < dim_end and h[pos] == _DIM_SIZE:
            size = h[pos + 1]
            pos += 2
            if size >= 0x80:
                size, pos = _varint(h, pos, size)
                if size < 0:
                    return None
        if pos < dim_end and h[pos] == _DIM_NAME:
            n = h[pos + 1]
            pos += 2
            if n >= 0x80:
                n, pos = _varint(h, pos, n)
            if n < 0 or pos + n != dim_end or not _utf8(h[pos : pos + n]):
                return None
            pos += n
        if pos != dim_end:
            return None
        dims.append(size)
    return tuple(dims)


#: Plugin names smdebug writes (valid UTF-8, no check needed).
_KNOWN_PLUGIN_NAMES = frozenset((b"mode_step", b"mode"))


def _metadata_ok(t: bytes) -> bool:
    """``t`` is SummaryMetadata (key and length included): ``{plugin_name?, content?}`` entries."""
    if t[0] != _METADATA:
        return False
    n = t[1]
    pos = 2
    if n >= 0x80:
        n, pos = _varint(t, pos, n)
    end = len(t)
    if pos + n != end:
        return False
    while pos < end:
        if t[pos] != _PLUGIN_DATA:
            return False
        n = t[pos + 1]
        pos += 2
        if n >= 0x80:
            n, pos = _varint(t, pos, n)
        entry_end = pos + n
        if n < 0 or entry_end > end:
            return False
        if pos < entry_end and t[pos] == _PLUGIN_NAME:
            n = t[pos + 1]
            pos += 2
            if n >= 0x80:
                n, pos = _varint(t, pos, n)
            name = t[pos : pos + n]
            if n < 0 or pos + n > entry_end or (name not in _KNOWN_PLUGIN_NAMES and not _utf8(name)):
                return False
            pos += n
        if pos < entry_end and t[pos] == _PLUGIN_CONTENT:
            n = t[pos + 1]
            pos += 2
            if n >= 0x80:
                n, pos = _varint(t, pos, n)
            if n < 0:
                return False
            pos += n
        if pos != entry_end:
            return False
    return True


def _utf8(data: bytes) -> bool:
    """Whether ``data`` is valid UTF-8 (protobuf rejects a proto3 string field that is not)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True

"""The protobuf wire bytes of a tensor record, field by field (the scanner behind :mod:`record_scan`).

Every function reads a ``bytes`` object ``h`` holding the start of (or a whole)
``Event`` payload, and answers only for the canonical layout of a tensor record
(FORMAT.md 2.2: fields in field-number order, each at most once, one-byte keys);
anything else is ``-1`` / ``None`` / ``False``, and the caller lets protobuf
decide. Reading past ``h`` raises ``IndexError``: ``h`` is never longer than the
payload, so a length that runs past the record cannot be followed silently.
"""

from __future__ import annotations

from tornasole.format.tensors import _DT_TO_NP

__all__ = ["varint_rest", "value_start", "scan_value", "metadata_ok"]

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


def varint_rest(buf, pos: int, first: int) -> tuple[int, int]:
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


def _after_key(h: bytes, pos: int) -> tuple[int, int]:
    """The varint after the one-byte key at ``pos`` (a length-delimited field's length, or a varint
    field's value) and the position after it; -1 for a varint too long (:func:`varint_rest`)."""
    n = h[pos + 1]
    if n < 0x80:
        return n, pos + 2
    return varint_rest(h, pos + 2, n)


def value_start(h: bytes, end: int) -> int:
    """Where Summary.Value's fields start in ``h`` (Event{wall_time?, step?, summary{value{...}}}), or -1.

    The Summary and its one Value must both end where the Event ends. Raises
    ``IndexError`` when ``h`` (never longer than the payload) runs out first.
    """
    pos = 0
    key = h[0]
    if key == _WALL_TIME:
        pos = 9
        key = h[9]
    if key == _STEP:
        b = h[pos + 1]
        pos += 2
        if b >= 0x80:
            b, pos = varint_rest(h, pos, b)
            if b < 0:
                return -1
        key = h[pos]
    if key != _SUMMARY:
        return -1
    # The Summary, then its one Value, each ending where the Event ends. This runs once per record:
    # the lengths are read in place (a loop costs nothing measurable here, a call per length does).
    inner = _VALUE
    while True:
        n = h[pos + 1]
        pos += 2
        if n >= 0x80:  # lengths of a few KB: two-byte varints, decoded here
            b = h[pos]
            if b < 0x80:
                n = (n & 0x7F) | (b << 7)
                pos += 1
            else:
                n, pos = varint_rest(h, pos, n)
                if n < 0:
                    return -1
        if pos + n != end:
            return -1
        if inner is None:
            return pos
        if h[pos] != inner:
            return -1
        inner = None


def scan_value(h: bytes, pos: int, end: int, tag: bytes):
    """Summary.Value's tag and TensorProto (dtype, tensor_shape?, tensor_content), field by field."""
    if h[pos] != _TAG:
        return None
    n, pos = _after_key(h, pos)
    if n != len(tag) or h[pos : pos + n] != tag:
        return None
    pos += n
    if pos >= end or h[pos] != _TENSOR:
        return None
    n, pos = _after_key(h, pos)
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
        n, pos = _after_key(h, pos)
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
    n, pos = _after_key(h, pos)
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
        n, pos = _after_key(h, pos)
        dim_end = pos + n
        if n < 0 or dim_end > end:
            return None
        size = 0
        if pos < dim_end and h[pos] == _DIM_SIZE:
            size, pos = _after_key(h, pos)
            if size < 0:
                return None
        if pos < dim_end and h[pos] == _DIM_NAME:
            n, pos = _after_key(h, pos)
            if n < 0 or pos + n != dim_end or not _utf8(h[pos : pos + n]):
                return None
            pos += n
        if pos != dim_end:
            return None
        dims.append(size)
    return tuple(dims)


#: Plugin names smdebug writes (valid UTF-8, no check needed).
_KNOWN_PLUGIN_NAMES = frozenset((b"mode_step", b"mode"))


def metadata_ok(t: bytes) -> bool:
    """``t`` is SummaryMetadata (key and length included): ``{plugin_name?, content?}`` entries."""
    if t[0] != _METADATA:
        return False
    n = t[1]
    pos = 2
    if n >= 0x80:
        n, pos = varint_rest(t, pos, n)
    end = len(t)
    if pos + n != end:
        return False
    while pos < end:
        if t[pos] != _PLUGIN_DATA:
            return False
        n = t[pos + 1]
        pos += 2
        if n >= 0x80:
            n, pos = varint_rest(t, pos, n)
        entry_end = pos + n
        if n < 0 or entry_end > end:
            return False
        if pos < entry_end and t[pos] == _PLUGIN_NAME:
            n = t[pos + 1]
            pos += 2
            if n >= 0x80:
                n, pos = varint_rest(t, pos, n)
            name = t[pos : pos + n]
            if n < 0 or pos + n > entry_end or (name not in _KNOWN_PLUGIN_NAMES and not _utf8(name)):
                return False
            pos += n
        if pos < entry_end and t[pos] == _PLUGIN_CONTENT:
            n = t[pos + 1]
            pos += 2
            if n >= 0x80:
                n, pos = varint_rest(t, pos, n)
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

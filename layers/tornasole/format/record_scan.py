"""Where the value of a tensor record lies, found without a protobuf message.

The trial reader's hot path. An event record written by smdebug (or by us) is
``Event{wall_time, step, summary{value{tag, tensor{dtype, tensor_shape{dim*},
tensor_content}, metadata{plugin_data*}}}}``, serialized in field-number order
(FORMAT.md 2.2). :func:`scan_tensor_record` walks those bytes in place with a
small varint scanner (:mod:`tornasole.format.wire_scan`) and returns the dtype, the shape and where
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

Fast because a tensor's records differ only in wall time, step and mode step:
the first record of a tag is scanned field by field, and its bytes from the tag
up to the content become that tag's layout; later records are checked against
it with one comparison, and the metadata after the content (the same for every
tensor of a step) with one set lookup of already validated metadata.
"""

from __future__ import annotations

import struct

import numpy as np

from tornasole.format.crc import CONSTANT_PAYLOAD_CRC
from tornasole.format.tfrecord import FOOTER_SIZE, HEADER_SIZE, OVERHEAD, length_crc
from tornasole.format.wire_scan import metadata_ok, scan_value, value_start

__all__ = ["scan_tensor_record"]

_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")


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
    >>> from tornasole.format.event_records import encode_record
    >>> rec = encode_record("w", np.float32([[1, 2]]), step=3, mode=None, mode_step=None, wall_time=1.0)
    >>> dt, shape, off, n = scan_tensor_record(rec, 0, len(rec), "w")
    >>> (dt.name, shape, n, np.frombuffer(rec, dt, n, offset=off).tolist())
    ('float32', (1, 2), 2, [1.0, 2.0])
    """
    if length < OVERHEAD or start < 0 or start + length > len(buf):
        return None
    layout = _LAYOUTS.get(tag)
    if layout is None:
        return _scan_record(buf, start, length, tag, None)
    # The common case, inline (this runs once per value): a tag seen before, checked by comparing
    # bytes (see _known_layout, the same steps as a function, which the tests call).
    end = start + length - FOOTER_SIZE
    header = _HEADERS.get(length)
    pos = start + HEADER_SIZE
    mid = None
    if header is not None and buf[start:pos] == header and buf[end : end + FOOTER_SIZE] == _FOOTER_BYTES:
        try:
            key = buf[pos]
            if key == 0x09:  # Event.wall_time, fixed64
                pos += 9
                key = buf[pos]
            if key == 0x10:  # Event.step: a varint of one or two bytes here (longer: _known_layout)
                if buf[pos + 1] < 0x80:
                    pos += 2
                else:
                    pos = pos + 3 if buf[pos + 2] < 0x80 else end
        except IndexError:
            pos = end
        mid = layout[6].get(end - pos)
    if mid is None or buf[pos : pos + len(mid)] != mid:
        return _known_layout(buf, start, length, layout) or _scan_record(buf, start, length, tag, layout)
    offset = pos + len(mid)
    tensor_end = offset + layout[4]
    if tensor_end != end and buf[tensor_end:end] not in _VALID_TAILS:
        return _scan_record(buf, start, length, tag, layout)
    return layout[1], layout[2], offset, layout[3]


def _scan_record(buf, start: int, length: int, tag: str, layout: tuple | None):
    """:func:`scan_tensor_record` field by field (``layout``: the tag's, when known)."""
    size, len_crc = _HEADER.unpack_from(buf, start)
    end = start + length - FOOTER_SIZE
    if size + OVERHEAD != length or _FOOTER.unpack_from(buf, end)[0] != CONSTANT_PAYLOAD_CRC:
        return None
    if len_crc != length_crc(size):
        return None
    base = start + HEADER_SIZE
    # The fields before the content are a few dozen bytes: scan a copy of them (indexing bytes
    # is several times cheaper than indexing a mapping).
    found = None
    if layout is not None:  # the common case, inline: wall time, step, two lengths, then the layout
        prefix, np_dtype, shape, count, content_len, head_bytes, _ = layout
        h = bytes(buf[base : base + head_bytes if size > head_bytes else end])
        try:
            pos = value_start(h, size)
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
                if not metadata_ok(tail):
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
#: The last item: remaining payload length after the step -> the bytes up to the content (see
#: :func:`_known_layout`).
_LAYOUTS: dict[str, tuple[bytes, np.dtype, tuple[int, ...], int, int, int, dict[int, bytes | None]]] = {}
_MAX_LAYOUTS = 1 << 14
#: Metadata bytes already validated: every tensor of a step carries the same (mode step, mode).
_VALID_TAILS: set[bytes] = set()


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
    pos = value_start(h, end)
    if pos < 0:
        return None
    found = scan_value(h, pos, end, tag_bytes)
    if found is not None:
        if len(_LAYOUTS) >= _MAX_LAYOUTS:
            _LAYOUTS.clear()
        np_dtype, shape, offset, count, tensor_end = found
        prefix = h[pos:offset]
        _LAYOUTS[tag] = (prefix, np_dtype, shape, count, tensor_end - offset, len(prefix) + _PREFIX_BYTES, {})
    return found


#: The record header (length and its masked CRC) of each record length seen: a function of the length.
_HEADERS: dict[int, bytes] = {}
_FOOTER_BYTES = _FOOTER.pack(CONSTANT_PAYLOAD_CRC)
#: Longest Event.step varint taken by the comparison path (longer ones: the field-by-field scan).
_MAX_STEP_VARINT = 9


def _known_layout(buf, start: int, length: int, layout: tuple):
    """:func:`scan_tensor_record` for a tag whose layout is known, by comparing bytes; ``None`` if unsure.

    Given the record's length, everything but the wall time and the step is
    fixed: the header (length and its CRC), the footer, and from the Summary's
    key to the content (the Summary's and the Value's keys and lengths, both
    ending where the Event ends, then the tag's validated layout). So the
    record is checked with three comparisons against bytes built once per
    length, a walk over the wall time and the step varint, and the set lookup
    of the metadata after the content, exactly what the field-by-field scan
    accepts with minimal length varints. Anything else (a varint not minimal,
    unseen metadata, another length) returns ``None`` and takes that scan.
    """
    end = start + length - FOOTER_SIZE
    header = _HEADERS.get(length)
    if header is None:
        if len(_HEADERS) >= _MAX_LAYOUTS:
            _HEADERS.clear()
        size = length - OVERHEAD
        header = _HEADERS[length] = _HEADER.pack(size, length_crc(size))
    if buf[start : start + HEADER_SIZE] != header or buf[end : end + FOOTER_SIZE] != _FOOTER_BYTES:
        return None
    pos = start + HEADER_SIZE
    try:
        key = buf[pos]
        if key == 0x09:  # Event.wall_time, fixed64
            pos += 9
            key = buf[pos]
        if key == 0x10:  # Event.step, a varint
            stop = pos + 1 + _MAX_STEP_VARINT
            pos += 1
            while buf[pos] >= 0x80:
                pos += 1
                if pos >= stop:
                    return None
            pos += 1
    except IndexError:
        return None
    mids = layout[6]
    rest = end - pos
    mid = mids.get(rest, b"")
    if mid == b"":
        if len(mids) >= 64:
            mids.clear()
        mid = mids[rest] = _summary_bytes(layout[0], layout[4], rest)
    if mid is None or buf[pos : pos + len(mid)] != mid:
        return None
    offset = pos + len(mid)
    tensor_end = offset + layout[4]
    if tensor_end != end and buf[tensor_end:end] not in _VALID_TAILS:
        return None
    return layout[1], layout[2], offset, layout[3]


def _summary_bytes(prefix: bytes, content_len: int, rest: int) -> bytes | None:
    """``Summary`` key and length, ``Value`` key and length, ``prefix``: when both end ``rest`` bytes on.

    ``None`` when no minimal encoding fits (or the tensor would not fit in the Value).
    """
    for summary_len_bytes in range(1, 6):
        summary = rest - 1 - summary_len_bytes
        if summary < 0 or len(_varint(summary)) != summary_len_bytes:
            continue
        for value_len_bytes in range(1, 6):
            value = summary - 1 - value_len_bytes
            if value < 0 or len(_varint(value)) != value_len_bytes:
                continue
            if value < len(prefix) + content_len:
                return None
            return b"\x2a" + _varint(summary) + b"\x0a" + _varint(value) + prefix
        return None
    return None


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)

"""TFRecord framing: how event payloads are delimited inside an event file.

A record is ``<Q length> <I masked CRC of the 8 length bytes> payload <I footer>``,
all little-endian (FORMAT.md 2.1). smdebug writes a *constant* footer (the masked
CRC of ``b"0x12345678"``) instead of the payload's CRC, and its reader insists on
that constant; standard TFRecord writers (smdebug's own ``tensorboard/`` files
included) put the real payload CRC there. We write the constant so smdebug can
read our files, and accept both on read so we can read anyone's.

The reader only computes the payload CRC when the footer is not the constant, so
the common path costs one 8-byte CRC per record. Truncation, a bad length CRC and
a bad payload CRC are distinct errors: the first usually means "still being
written / cut short", the others mean corruption.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator

from tornasole.exceptions import FormatError
from tornasole.format.crc import CONSTANT_PAYLOAD_CRC, masked_crc32c

__all__ = ["HEADER_SIZE", "FOOTER_SIZE", "OVERHEAD", "frame", "read_record", "iter_records", "length_crc"]

HEADER_SIZE = 12
FOOTER_SIZE = 4
#: Bytes a record adds around its payload (12-byte header + 4-byte footer).
OVERHEAD = HEADER_SIZE + FOOTER_SIZE

_LEN = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_HEADER = struct.Struct("<QI")
_CONSTANT_FOOTER = _CRC.pack(CONSTANT_PAYLOAD_CRC)


def frame(payload: bytes, write_checksum: bool = False) -> bytes:
    """Wrap one payload in TFRecord framing.

    Parameters
    ----------
    payload : bytes
        A serialized ``Event``.
    write_checksum : bool
        ``False`` (default, what smdebug writes in ``events/``): the constant
        footer. ``True``: the real masked CRC32C of the payload (standard
        TFRecord, what ``tensorboard/`` files carry).

    Returns
    -------
    bytes
        ``len(payload) + 16`` bytes.

    Examples
    --------
    >>> frame(b"abc")[-4:].hex()
    'b3c02d06'
    >>> len(frame(b"abc", write_checksum=True))
    19
    """
    length = _LEN.pack(len(payload))
    footer = _CRC.pack(masked_crc32c(payload)) if write_checksum else _CONSTANT_FOOTER
    return b"".join((length, _CRC.pack(masked_crc32c(length)), payload, footer))


def read_record(
    buf: bytes | memoryview, path: str | None, offset: int = 0, length: int | None = None
) -> bytes | memoryview:
    """Return the payload of the one record starting at ``offset`` of ``buf``.

    Parameters
    ----------
    buf : bytes or memoryview
        The file contents, or just the record's bytes from a ranged read.
    path : str or None
        The event file, for error messages.
    offset : int
        Where the record starts within ``buf``.
    length : int, optional
        The whole record size the index claims (``12 + payload + 4``); when given,
        a record whose header disagrees is reported instead of silently decoded.

    Returns
    -------
    bytes or memoryview
        A slice of ``buf`` (same type as ``buf[...]``).

    Raises
    ------
    FormatError
        Truncated record, length-CRC mismatch, payload-CRC mismatch, or a length
        that disagrees with ``length``; ``path`` and ``offset`` name the place.

    Examples
    --------
    >>> bytes(read_record(frame(b"hello"), "mem"))
    b'hello'
    """
    if length is not None and len(buf) - offset >= length >= OVERHEAD:
        # fast path of an indexed record (every value a trial reads): both checks, no error building
        size, len_crc = _HEADER.unpack_from(buf, offset)
        stop = offset + length - FOOTER_SIZE
        if (
            size + OVERHEAD == length
            and _CRC.unpack_from(buf, stop)[0] == CONSTANT_PAYLOAD_CRC
            and len_crc == length_crc(size)
        ):
            return buf[offset + HEADER_SIZE : stop]
    payload, _ = _read_at(buf, path, offset, offset)
    if length is not None and len(payload) + OVERHEAD != length:
        raise FormatError(
            f"record length mismatch: the index says {length} bytes, the record header says "
            f"{len(payload) + OVERHEAD}",
            path=path,
            offset=offset,
        )
    return payload


def iter_records(
    buf: bytes | memoryview, path: str | None, base_offset: int = 0
) -> Iterator[tuple[int, bytes | memoryview]]:
    """Yield ``(offset, payload)`` for every record in ``buf``.

    Parameters
    ----------
    buf : bytes or memoryview
        Concatenated records (a whole event file, or a tail of one).
    path : str or None
        The event file, for error messages.
    base_offset : int
        File offset of ``buf[0]``; yielded offsets and error offsets are file offsets.

    Raises
    ------
    FormatError
        As :func:`read_record`, at the first bad record (records before it are
        yielded first).

    Examples
    --------
    >>> [(o, bytes(p)) for o, p in iter_records(frame(b"a") + frame(b"bc"), "mem")]
    [(0, b'a'), (17, b'bc')]
    """
    pos = 0
    end = len(buf)
    while pos < end:
        payload, nxt = _read_at(buf, path, pos, base_offset + pos)
        yield base_offset + pos, payload
        pos = nxt


@functools.lru_cache(maxsize=1 << 16)
def length_crc(size: int) -> int:
    """Masked CRC of a record's 8 length bytes, computed once per length.

    It depends on the length alone, and lengths repeat: a tensor's record has
    the same size at every step.
    """
    return masked_crc32c(_LEN.pack(size))


def _read_at(buf: bytes | memoryview, path: str | None, pos: int, file_offset: int):
    """Decode the record at ``buf[pos]``; return ``(payload, next_pos)``."""
    avail = len(buf) - pos
    if avail < HEADER_SIZE:
        raise FormatError(
            f"truncated record: need {HEADER_SIZE} header bytes, only {max(avail, 0)} available",
            path=path,
            offset=file_offset,
        )
    size, len_crc = _HEADER.unpack_from(buf, pos)
    computed = masked_crc32c(buf[pos : pos + 8])
    if len_crc != computed:
        raise FormatError(
            f"length CRC mismatch: stored 0x{len_crc:08x}, computed 0x{computed:08x} (corrupt record header)",
            path=path,
            offset=file_offset,
        )
    start = pos + HEADER_SIZE
    stop = start + size
    if stop + FOOTER_SIZE > len(buf):
        raise FormatError(
            f"truncated record: header says a {size}-byte payload plus {FOOTER_SIZE}-byte footer, "
            f"only {len(buf) - start} bytes follow",
            path=path,
            offset=file_offset,
        )
    payload = buf[start:stop]
    (footer,) = _CRC.unpack_from(buf, stop)
    if footer != CONSTANT_PAYLOAD_CRC:
        actual = masked_crc32c(payload)
        if footer != actual:
            raise FormatError(
                f"payload CRC mismatch: stored 0x{footer:08x}, computed 0x{actual:08x} "
                f"(and not the constant footer 0x{CONSTANT_PAYLOAD_CRC:08x})",
                path=path,
                offset=file_offset,
            )
    return payload, stop + FOOTER_SIZE

"""Masked CRC32C, the checksum TFRecord framing uses.

TFRecord stores CRCs "masked" (rotated and offset) so that a CRC computed over
data that itself contains CRCs does not degenerate. The CRC32C itself comes from
``google_crc32c``, the standard C implementation, because record framing is on
the hot read path (one length CRC per record).
"""

from __future__ import annotations

import google_crc32c

__all__ = ["MASK_DELTA", "masked_crc32c", "CONSTANT_FOOTER_INPUT", "CONSTANT_PAYLOAD_CRC"]

MASK_DELTA = 0xA282EAD8

#: smdebug does not checksum payloads in ``events/`` files: it writes the masked
#: CRC of this fixed 10-byte ASCII string instead (FORMAT.md 2.1).
CONSTANT_FOOTER_INPUT = b"0x12345678"

#: ``masked_crc32c(CONSTANT_FOOTER_INPUT)``, written after every payload by default.
CONSTANT_PAYLOAD_CRC = 0x062DC0B3


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """Return the TFRecord-masked CRC32C of ``data`` as an unsigned 32-bit int.

    Parameters
    ----------
    data : bytes-like
        The bytes to checksum (the 8 length bytes, or a payload).

    Returns
    -------
    int
        ``((crc >> 15) | (crc << 17)) + 0xA282EAD8`` modulo 2**32.

    Examples
    --------
    >>> hex(masked_crc32c(b"0x12345678"))
    '0x62dc0b3'
    """
    crc = google_crc32c.value(data if isinstance(data, bytes) else bytes(data))
    return (((crc >> 15) | (crc << 17)) + MASK_DELTA) & 0xFFFFFFFF

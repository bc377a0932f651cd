"""The payload CRC is verified wherever the writer wrote one (issue #34 N10; FORMAT.md 2.1).

smdebug's ``events/`` records carry a constant footer instead of a payload CRC; a record with a
real footer (TensorBoard, a checksumming TFRecord writer) must never be read as valid after a bit
flip, on the fast paths (which only take the constant footer) or the slow one.
"""

from __future__ import annotations

import glob
import struct
from pathlib import Path

import numpy as np
import pytest

from tornasole.exceptions import FormatError
from tornasole.format import event_records, tfrecord
from tornasole.format.crc import CONSTANT_PAYLOAD_CRC, masked_crc32c

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "smdebug"


def record(checksum: bool) -> bytes:
    payload = event_records.encode_event(
        "gradients/fc.weight", np.full((4, 4), 0.5, dtype=np.float32), step=1, mode=None, mode_step=1
    )
    return tfrecord.frame(payload, write_checksum=checksum)


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


def test_a_real_payload_crc_is_accepted_when_it_matches() -> None:
    buf = record(checksum=True)
    tag, value = event_records.decode_tensor(tfrecord.read_record(buf, "f"), path="f")
    assert tag == "gradients/fc.weight"
    assert float(value[0, 0]) == 0.5


def test_a_flipped_payload_byte_under_a_real_crc_is_refused_on_every_path() -> None:
    buf = flip(record(checksum=True), len(record(True)) - 8)  # inside the tensor's bytes
    assert event_records.decode_indexed_tensor(buf, 0, len(buf), "gradients/fc.weight") is None
    with pytest.raises(FormatError, match="payload CRC mismatch"):
        tfrecord.read_record(buf, "f")


def test_a_flipped_length_byte_is_refused_even_under_the_constant_footer() -> None:
    buf = flip(record(checksum=False), 0)
    assert event_records.decode_indexed_tensor(buf, 0, len(buf), "gradients/fc.weight") is None
    with pytest.raises(FormatError):
        tfrecord.read_record(buf, "f")


def test_smdebug_event_files_carry_the_constant_footer_so_their_payloads_cannot_be_checked() -> None:
    """What FORMAT.md says is not checkable: every smdebug ``events/`` record has the constant."""
    footers = []
    for path in glob.glob(str(FIXTURES / "**" / "events" / "**" / "*.tfevents"), recursive=True):
        data, pos = Path(path).read_bytes(), 0
        while pos < len(data):
            (size,) = struct.unpack_from("<Q", data, pos)
            (footer,) = struct.unpack_from("<I", data, pos + 12 + size)
            payload = data[pos + 12 : pos + 12 + size]
            footers.append(footer == CONSTANT_PAYLOAD_CRC and footer != masked_crc32c(payload))
            pos += 16 + size
    assert len(footers) > 500
    assert all(footers)

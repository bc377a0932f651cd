"""TFRecord framing and masked CRC32C, on bytes only."""

from __future__ import annotations

import struct

import pytest

from tornasole.exceptions import FormatError
from tornasole.format.crc import CONSTANT_FOOTER_INPUT, CONSTANT_PAYLOAD_CRC, masked_crc32c
from tornasole.format.tfrecord import frame, iter_records, read_record


def test_constant_footer_is_masked_crc_of_magic_string() -> None:
    assert masked_crc32c(CONSTANT_FOOTER_INPUT) == CONSTANT_PAYLOAD_CRC == 0x062DC0B3


def test_masked_crc_of_length_matches_value_seen_on_disk() -> None:
    # FORMAT.md 2.1: a length of 306 has length-CRC 0xB2C6E922; 83 gives bytes 0d 7d 4e 91.
    assert masked_crc32c(struct.pack("<Q", 306)) == 0xB2C6E922
    assert struct.pack("<I", masked_crc32c(struct.pack("<Q", 83))) == bytes.fromhex("0d7d4e91")


def test_masked_crc_accepts_any_bytes_like() -> None:
    data = b"some payload"
    assert masked_crc32c(bytearray(data)) == masked_crc32c(memoryview(data)) == masked_crc32c(data)


def test_frame_layout_with_constant_footer() -> None:
    rec = frame(b"hello")
    assert len(rec) == 5 + 16
    assert rec[:8] == struct.pack("<Q", 5)
    assert rec[8:12] == struct.pack("<I", masked_crc32c(rec[:8]))
    assert rec[12:17] == b"hello"
    assert rec[17:] == b"\xb3\xc0\x2d\x06"


def test_frame_with_checksum_writes_real_payload_crc() -> None:
    rec = frame(b"hello", write_checksum=True)
    assert rec[17:] == struct.pack("<I", masked_crc32c(b"hello"))
    assert bytes(read_record(rec, "mem")) == b"hello"


def test_iter_records_yields_file_offsets_for_both_footers() -> None:
    buf = frame(b"a") + frame(b"", write_checksum=True) + frame(b"xyz")
    got = [(off, bytes(p)) for off, p in iter_records(buf, "f", base_offset=100)]
    assert got == [(100, b"a"), (117, b""), (133, b"xyz")]


def test_iter_records_over_memoryview_returns_views() -> None:
    buf = memoryview(frame(b"abc") + frame(b"de"))
    payloads = [p for _, p in iter_records(buf, "f")]
    assert [bytes(p) for p in payloads] == [b"abc", b"de"]
    assert all(isinstance(p, memoryview) for p in payloads)


def test_read_record_at_offset_checks_index_length() -> None:
    buf = frame(b"first") + frame(b"second")
    assert bytes(read_record(buf, "f", offset=21, length=22)) == b"second"
    with pytest.raises(FormatError, match="record length mismatch: the index says 30") as err:
        read_record(buf, "f", offset=21, length=30)
    assert err.value.offset == 21


@pytest.mark.parametrize("cut", [0, 5, 11])
def test_truncated_header_is_reported_as_truncation(cut: int) -> None:
    buf = frame(b"payload")[:cut] if cut else b""
    with pytest.raises(FormatError, match="truncated record: need 12 header bytes") as err:
        read_record(buf, "/run/events/x.tfevents")
    assert err.value.path == "/run/events/x.tfevents"
    assert "/run/events/x.tfevents" in str(err.value)


def test_truncated_payload_in_file_tail_names_file_and_offset() -> None:
    good = frame(b"ok")
    buf = good + frame(b"payload")[:-3]
    it = iter_records(buf, "/run/e.tfevents")
    assert bytes(next(it)[1]) == b"ok"
    with pytest.raises(FormatError, match="truncated record: header says a 7-byte payload") as err:
        next(it)
    assert err.value.offset == len(good)
    assert "offset 18" in str(err.value)


def test_wrong_length_crc_is_distinct_from_truncation() -> None:
    rec = bytearray(frame(b"payload"))
    rec[8] ^= 0xFF
    with pytest.raises(FormatError, match="length CRC mismatch") as err:
        read_record(bytes(rec), "/run/e.tfevents")
    assert err.value.path == "/run/e.tfevents"
    assert err.value.offset == 0


def test_corrupt_length_field_fails_on_its_crc_not_on_a_huge_read() -> None:
    rec = bytearray(frame(b"payload"))
    rec[7] = 0x7F  # an absurd length
    with pytest.raises(FormatError, match="length CRC mismatch"):
        read_record(bytes(rec), "f")


def test_bad_payload_crc_is_reported() -> None:
    rec = bytearray(frame(b"payload", write_checksum=True))
    rec[13] ^= 0x01  # flip a payload bit: the real CRC no longer matches
    with pytest.raises(FormatError, match="payload CRC mismatch") as err:
        list(iter_records(bytes(rec), "/run/tb.tfevents", base_offset=40))
    assert err.value.offset == 40
    assert "/run/tb.tfevents" in str(err.value)

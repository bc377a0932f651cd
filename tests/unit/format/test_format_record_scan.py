"""The in-place record scanner against the protobuf decode: the same value, or no answer at all.

``decode_indexed_tensor`` answers from :func:`scan_tensor_record` when the
scanner recognises the record and from a protobuf parse otherwise; these tests
hold the scanner to "never a different answer than protobuf" on every fixture
record, on every dtype and shape the writer makes, on non-canonical encodings
and on fuzzed, truncated and bit-flipped records.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from tornasole.format import record_scan
from tornasole.format.event_records import (
    _parse_indexed_tensor,
    decode_indexed_tensor,
    encode_event,
    encode_record,
    to_array,
)
from tornasole.format.index import decode_index
from tornasole.format.proto import messages
from tornasole.format.record_scan import scan_tensor_record
from tornasole.format.tfrecord import HEADER_SIZE, frame, iter_records


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _check(buf: bytes | memoryview, start: int, length: int, tag: str) -> np.ndarray | None:
    """Scanner and protobuf agree on this record; return the protobuf answer."""
    expected = _parse_indexed_tensor(buf, start, length, tag)
    found = scan_tensor_record(buf, start, length, tag)
    if found is not None:
        dt, shape, offset, count = found
        scanned = np.frombuffer(buf, dt, count, offset).reshape(shape)
        assert expected is not None, "the scanner answered for a record protobuf refuses"
        assert _same(scanned, expected)
    got = decode_indexed_tensor(buf, start, length, tag)
    assert _same(got, expected)
    return expected


@pytest.fixture(autouse=True)
def _fresh_caches() -> None:
    """Each test starts without layouts learned by an earlier one (and proves the cache safe)."""
    record_scan._LAYOUTS.clear()
    record_scan._VALID_TAILS.clear()


def _event_files(trees: list[Path]) -> list[Path]:
    return sorted(p for tree in trees for p in (tree / "events").rglob("*.tfevents"))


def test_every_fixture_record_scans_to_the_protobuf_value(fixture_trees: list[Path]) -> None:
    scanned = total = 0
    for path in _event_files(fixture_trees):
        data = path.read_bytes()
        view = memoryview(data)
        for offset, payload in iter_records(data, str(path)):
            ev = messages().Event()
            ev.ParseFromString(payload)
            if len(ev.summary.value) != 1 or not ev.summary.value[0].HasField("tensor"):
                continue
            tag = ev.summary.value[0].tag
            length = len(payload) + 16
            total += 1
            value = _check(view, offset, length, tag)
            assert value is not None
            scanned += scan_tensor_record(view, offset, length, tag) is not None
    assert total > 100
    assert scanned > total * 0.9  # smdebug's own records are the canonical layout


def test_fixture_index_entries_decode_identically(fixture_trees: list[Path]) -> None:
    """Through the index, as a trial reads: every entry's record, tag as the index says."""
    n = 0
    for tree in fixture_trees:
        for index_path in sorted((tree / "index").rglob("*.json")):
            index = decode_index(index_path.read_bytes(), str(index_path))
            if index.event_file_name is None:
                continue
            data = memoryview((tree / index.event_file_name).read_bytes())
            for entry in index.tensors:
                assert _check(data, entry.start_idx, entry.length, entry.tensorname) is not None
                n += 1
    assert n > 100


_ARRAYS = [
    np.float32(1.5),
    np.zeros((), np.float64),
    np.arange(7, dtype=np.float32),
    np.arange(12, dtype=np.int64).reshape(3, 4),
    np.arange(24, dtype=np.int8).reshape(2, 3, 4) - 12,
    np.array([True, False, True]),
    np.arange(5, dtype=np.float16),
    np.arange(4, dtype=np.uint16),
    np.arange(6, dtype=np.complex64).reshape(2, 3),
    np.ones((1, 1, 1, 1, 1), np.float32),
    np.arange(40000, dtype=np.float32).reshape(200, 200),  # multi-byte varint lengths everywhere
    np.array(["a", "bc"]),  # strings: protobuf decides
    np.zeros((0, 3), np.float32),  # empty: protobuf decides
]


@pytest.mark.parametrize("step", [0, 1, 127, 128, 300_000, 2**40])
@pytest.mark.parametrize("array", _ARRAYS, ids=lambda a: f"{a.dtype}{list(np.shape(a))}")
def test_written_records_decode_identically(array: np.ndarray, step: int) -> None:
    rec = encode_record("layer/w.0", array, step=step, mode=None, mode_step=None, wall_time=12.5)
    first = _check(rec, 0, len(rec), "layer/w.0")
    again = _check(rec, 0, len(rec), "layer/w.0")  # the second read goes through the learned layout
    assert first is not None
    assert _same(first, again)
    assert _same(first, to_array(array))


def test_numeric_records_are_scanned_and_the_value_views_the_buffer() -> None:
    rec = encode_record("w", np.arange(6, dtype=np.float32).reshape(2, 3), step=4, mode=None, mode_step=None)
    buf = memoryview(rec)
    assert scan_tensor_record(buf, 0, len(rec), "w") is not None
    value = decode_indexed_tensor(buf, 0, len(rec), "w")
    assert not value.flags.writeable
    assert value.base is not None
    assert value.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_wrong_tag_and_other_records_give_no_answer() -> None:
    rec = encode_record("w", np.float32([1, 2]), step=4, mode=None, mode_step=None)
    assert scan_tensor_record(rec, 0, len(rec), "v") is None
    assert decode_indexed_tensor(rec, 0, len(rec), "v") is None
    assert decode_indexed_tensor(rec, 0, len(rec), "\ud800") is None  # a tag no record can carry
    two = rec + encode_record("w", np.float32([3]), step=5, mode=None, mode_step=None)
    assert _check(two, len(rec), len(two) - len(rec), "w").tolist() == [3.0]
    assert scan_tensor_record(two, 0, len(two), "w") is None  # two records are not one


def test_a_learned_layout_never_answers_for_a_different_shape() -> None:
    a = encode_record("w", np.zeros((2, 3), np.float32), step=1, mode=None, mode_step=None)
    b = encode_record("w", np.zeros((3, 2), np.float32), step=2, mode=None, mode_step=None)
    c = encode_record("w", np.zeros((6,), np.int32), step=3, mode=None, mode_step=None)
    assert _check(a, 0, len(a), "w").shape == (2, 3)
    assert _check(b, 0, len(b), "w").shape == (3, 2)
    value = _check(c, 0, len(c), "w")
    assert value.shape == (6,)
    assert value.dtype == np.int32


def _payload(array: np.ndarray, tag: str = "t") -> bytes:
    return encode_event(tag, array, step=9, mode=None, mode_step=None, wall_time=1.0)


def _event_with(edit) -> bytes:
    ev = messages().Event()
    ev.ParseFromString(_payload(np.float32([1, 2, 3])))
    edit(ev)
    return ev.SerializeToString()


def _set_content_and_list(ev) -> None:
    ev.summary.value[0].tensor.float_val.append(7.0)


def _add_second_value(ev) -> None:
    ev.summary.value.add(tag="t").tensor.CopyFrom(ev.summary.value[0].tensor)


def _unknown_rank(ev) -> None:
    ev.summary.value[0].tensor.tensor_shape.unknown_rank = True


def _version_number(ev) -> None:
    ev.summary.value[0].tensor.version_number = 3


def _bad_plugin_name(ev) -> None:
    ev.summary.value[0].metadata.plugin_data.add(plugin_name="x", content=b"\xff")


@pytest.mark.parametrize(
    "payload",
    [
        _event_with(_set_content_and_list),
        _event_with(_add_second_value),
        _event_with(_unknown_rank),
        _event_with(_version_number),
        _event_with(_bad_plugin_name),
        # unknown field (Event field 6, varint) at the end
        _payload(np.float32([1, 2, 3])) + b"\x30\x01",
        # wall_time after the summary (protobuf takes any order)
        _payload(np.float32([1, 2, 3]))[9:] + _payload(np.float32([1, 2, 3]))[:9],
        # the step field twice (the last wins)
        b"\x10\x05" + _payload(np.float32([1, 2, 3])),
        # an overlong (non-canonical) varint for the step
        b"\x09" + b"\0" * 8 + b"\x10\x89\x80\x80\x00" + _payload(np.float32([1]))[11:],
    ],
    ids=[
        "value-list",
        "two-values",
        "unknown-rank",
        "version",
        "plugin",
        "unknown-field",
        "order",
        "dup",
        "overlong",
    ],
)
def test_non_canonical_encodings_are_left_to_protobuf(payload: bytes) -> None:
    rec = frame(payload)
    _check(rec, 0, len(rec), "t")


def _mutations(payload: bytes, rng: random.Random, n: int):
    """Payloads with one bit flipped, one byte replaced, removed or inserted, or cut short."""
    for _ in range(n):
        data = bytearray(payload)
        kind = rng.randrange(5)
        i = rng.randrange(len(data))
        if kind == 0:
            data[i] ^= 1 << rng.randrange(8)
        elif kind == 1:
            data[i] = rng.randrange(256)
        elif kind == 2:
            del data[i]
        elif kind == 3:
            data.insert(i, rng.randrange(256))
        else:
            del data[i:]
        yield bytes(data)


@pytest.mark.parametrize("seed", range(4))
def test_fuzzed_payloads_never_scan_to_a_different_value(seed: int) -> None:
    """Mutated payloads re-framed (so the framing checks pass and the scanner sees the bytes)."""
    rng = random.Random(seed)
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(300, dtype=np.int16), np.float64(2.0)]
    for array in arrays:
        payload = _payload(array, "layer/t")
        rec = frame(payload)
        _check(rec, 0, len(rec), "layer/t")  # learn the layout: mutations meet the cached path too
        for mutated in _mutations(payload, rng, 400):
            rec = frame(mutated)
            _check(rec, 0, len(rec), "layer/t")


def test_bit_flipped_and_truncated_records_give_no_answer() -> None:
    rec = encode_record("w", np.arange(50, dtype=np.float32), step=3, mode=None, mode_step=None)
    assert _check(rec, 0, len(rec), "w") is not None
    for i in range(len(rec)):
        if HEADER_SIZE <= i < len(rec) - 4:
            continue  # payload bytes: covered (re-framed) by the fuzz test above
        flipped = bytearray(rec)
        flipped[i] ^= 0x10
        assert _check(bytes(flipped), 0, len(rec), "w") is None  # the framing is corrupt
    for cut in range(len(rec)):
        assert _check(rec[:cut], 0, len(rec), "w") is None
    assert _check(rec, 0, len(rec) - 1, "w") is None
    assert _check(rec, -1, len(rec), "w") is None
    assert _check(rec, 1, len(rec), "w") is None


def test_payload_crc_footer_is_left_to_the_checking_path() -> None:
    """A real payload CRC in the footer (standard TFRecord) is verified by the slow path, as before."""
    rec = frame(_payload(np.float32([1, 2])), write_checksum=True)
    assert scan_tensor_record(rec, 0, len(rec), "t") is None
    assert decode_indexed_tensor(rec, 0, len(rec), "t") is None


@pytest.mark.parametrize("seed", range(3))
def test_records_of_a_known_tag_are_compared_not_rescanned_and_never_differ(seed: int) -> None:
    """Once a tag's layout and a step's metadata are known, records are checked by comparison.

    Steps whose varints have different lengths (0 omits the field) give the same
    tag records of different lengths; each is answered by the comparison path, and
    mutations of it (re-framed, so the framing checks pass) never scan to a value
    protobuf would not give.
    """
    from tornasole.modes import TRAIN

    rng = random.Random(seed)
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    for step in (0, 5, 127, 128, 20000, 2**40):
        payload = encode_event("layer/t", array + step, step=step, mode=TRAIN, mode_step=step, wall_time=2.5)
        rec = frame(payload)
        value = _check(rec, 0, len(rec), "layer/t")
        assert value is not None
        assert value[0, 0] == step
        assert "layer/t" in record_scan._LAYOUTS
        assert record_scan._VALID_TAILS
        assert record_scan._known_layout(rec, 0, len(rec), record_scan._LAYOUTS["layer/t"]) is not None
        for mutated in _mutations(payload, rng, 150):
            rec = frame(mutated)
            _check(rec, 0, len(rec), "layer/t")
        framing = frame(payload)
        for i in (0, 8, len(framing) - 1):  # the compared header and footer bytes
            flipped = bytearray(framing)
            flipped[i] ^= 0x01
            assert _check(bytes(flipped), 0, len(framing), "layer/t") is None

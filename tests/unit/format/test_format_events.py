"""Tensor record encode/decode: dtypes, shapes, strings, modes, exact bytes, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tornasole.exceptions import FormatError, TornasoleValueError
from tornasole.format.event_records import TensorRecord, decode_event, encode_event, encode_record, to_array
from tornasole.format.proto import messages
from tornasole.format.tfrecord import read_record
from tornasole.modes import ModeKeys

TRAIN = ModeKeys.TRAIN
NUMERIC_DTYPES = [
    "float32",
    "float64",
    "float16",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "complex64",
    "complex128",
    "bool",
]


def _roundtrip(value, **kw) -> TensorRecord:
    args = {"step": 3, "mode": TRAIN, "mode_step": 1, "wall_time": 12.5} | kw
    return decode_event(encode_event("t", value, **args))


def test_loss_record_bytes_match_the_hexdump_in_format_md() -> None:
    # FORMAT.md 2.1: the 0-d loss at step 5 of pt_hook_single, 99 bytes at offset 0x737.
    on_disk = bytes.fromhex(
        "5300000000000000 0d7d4e91"
        "09 140955edb5c0da41 1005 2a46 0a44 0a19" + b"CrossEntropyLoss_output_0".hex()
        + "420a 0801 1200 2204 3753873f"
        "4a1b 0a0e 0a09" + b"mode_step".hex() + "120135 0a09 0a04" + b"mode".hex() + "120131"
        "b3c02d06"
    )  # fmt: skip
    wall_time = float(np.frombuffer(bytes.fromhex("140955edb5c0da41"), "<f8")[0])
    value = np.frombuffer(bytes.fromhex("3753873f"), "<f4").reshape(())
    rec = encode_record(
        "CrossEntropyLoss_output_0", value, step=5, mode=TRAIN, mode_step=5, wall_time=wall_time
    )
    assert len(on_disk) == 99
    assert rec == on_disk


def test_step_zero_is_elided_and_dim_names_carry_tag() -> None:
    value = np.zeros((2, 3), np.float32)
    payload = encode_event("w", value, step=0, mode=None, mode_step=None, wall_time=2.0)
    ev = messages().Event()
    ev.ParseFromString(payload)
    assert payload[9] == 0x2A  # straight from wall_time to the summary field
    dims = ev.summary.value[0].tensor.tensor_shape.dim
    assert [(d.size, d.name) for d in dims] == [(2, "w_2"), (3, "w_3")]
    plugins = [(p.plugin_name, p.content) for p in ev.summary.value[0].metadata.plugin_data]
    assert plugins == [("mode_step", b"0"), ("mode", b"4")]  # None -> GLOBAL and mode_step = step


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_every_numeric_dtype_reads_back_as_itself(dtype: str) -> None:
    value = (np.arange(6) % 3 - (0 if dtype.startswith(("u", "b")) else 1)).astype(dtype).reshape(2, 3)
    rec = _roundtrip(value)
    assert rec.value.dtype == np.dtype(dtype)
    assert rec.value.shape == (2, 3)
    np.testing.assert_array_equal(rec.value, value)


def test_int8_keeps_its_sign() -> None:
    np.testing.assert_array_equal(_roundtrip(np.int8([-1, 2])).value, np.int8([-1, 2]))


def test_bool_is_one_byte_per_element() -> None:
    ev = messages().Event()
    ev.ParseFromString(encode_event("b", np.array([True, False, True]), step=1, mode=TRAIN, mode_step=1))
    assert ev.summary.value[0].tensor.tensor_content == b"\x01\x00\x01"


def test_decoded_fields_and_wall_time() -> None:
    rec = _roundtrip(np.float32([1.5]), step=7, mode=ModeKeys.EVAL, mode_step=2, wall_time=1795348405.25)
    assert (rec.tag, rec.step, rec.mode, rec.mode_step) == ("t", 7, ModeKeys.EVAL, 2)
    assert rec.wall_time == 1795348405.25


def test_scalars_become_shape_one_and_zero_d_stays_zero_d() -> None:
    assert _roundtrip(0.25).value.shape == (1,)
    assert _roundtrip(0.25).value.dtype == np.float64
    assert _roundtrip(np.float32(3.5)).value.dtype == np.float32
    assert _roundtrip(np.array(3.5, np.float32)).value.shape == ()
    assert _roundtrip([1, 2]).value.tolist() == [1, 2]


def test_non_contiguous_and_big_endian_inputs_are_written_c_order_little_endian() -> None:
    base = np.arange(12, dtype=">i4").reshape(3, 4)
    rec = _roundtrip(base.T)
    assert rec.value.dtype == np.dtype("<i4")
    np.testing.assert_array_equal(rec.value, base.T)


def test_strings_1d_are_string_val_with_dtype_zero() -> None:
    payload = encode_event("s", np.array(["ab", "héllo"]), step=1, mode=TRAIN, mode_step=1)
    ev = messages().Event()
    ev.ParseFromString(payload)
    tensor = ev.summary.value[0].tensor
    assert tensor.dtype == 0
    assert list(tensor.string_val) == [b"ab", "héllo".encode()]
    assert [d.size for d in tensor.tensor_shape.dim] == [2]
    value = decode_event(payload).value
    assert value.dtype == np.dtype("<U5")
    assert value.tolist() == ["ab", "héllo"]


def test_bytes_object_and_multi_d_strings_round_trip() -> None:
    assert _roundtrip(np.array([b"x", b"yz"])).value.tolist() == ["x", "yz"]
    assert _roundtrip(np.array(["a", b"b", 3], dtype=object)).value.tolist() == ["a", "b", "3"]
    two_d = _roundtrip(np.array([["a", "b"], ["c", "d"]])).value
    assert two_d.shape == (2, 2)
    assert two_d[1, 0] == "c"
    assert _roundtrip(np.array("zero-d")).value.shape == ()


def test_non_utf8_strings_read_back_as_bytes() -> None:
    assert _roundtrip(np.array([b"\xff\xfe"])).value.tolist() == [b"\xff\xfe"]


def test_size_zero_arrays_read_back_empty_with_shape_and_dtype() -> None:
    for dtype in ("float32", "int64", "<U1"):
        rec = _roundtrip(np.zeros((0, 3), dtype))
        assert rec.value.shape == (0, 3)
        assert rec.value.dtype.kind == np.dtype(dtype).kind


def test_torch_bfloat16_is_written_as_float32() -> None:
    t = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
    assert to_array(t).dtype == np.float32
    rec = _roundtrip(t)
    assert rec.value.dtype == np.float32
    assert rec.value.tolist() == [1.5, -2.0]


def test_longdouble_is_written_as_float64_and_datetimes_are_refused() -> None:
    assert _roundtrip(np.array([1.5], dtype=np.longdouble)).value.dtype == np.float64
    with pytest.raises(TornasoleValueError, match="tensor 'when': dtype datetime64"):
        encode_event("when", np.array(["2020-01-01"], "datetime64[D]"), step=0, mode=None, mode_step=None)


def test_value_lists_and_bfloat16_content_written_by_tf_are_read() -> None:
    m = messages()
    ev = m.Event(step=1)
    val = ev.summary.value.add(tag="tf")
    val.tensor.dtype = 1
    val.tensor.tensor_shape.dim.add(size=3)
    val.tensor.float_val.extend([0.5])  # one value, repeated (TF semantics)
    assert decode_event(ev.SerializeToString()).value.tolist() == [0.5, 0.5, 0.5]
    val.tensor.Clear()
    val.tensor.dtype = 14  # DT_BFLOAT16: the top 16 bits of a float32
    val.tensor.tensor_shape.dim.add(size=1)
    val.tensor.tensor_content = (np.float32([1.5]).view("<u4") >> 16).astype("<u2").tobytes()
    got = decode_event(ev.SerializeToString()).value
    assert got.dtype == np.float32
    assert got.tolist() == [1.5]


def test_missing_plugin_data_gives_none_mode() -> None:
    m = messages()
    ev = m.Event(step=4, wall_time=1.0)
    val = ev.summary.value.add(tag="x")
    val.tensor.dtype = 3
    val.tensor.tensor_content = np.int32([9]).tobytes()
    val.tensor.tensor_shape.dim.add(size=1)
    rec = decode_event(ev.SerializeToString())
    assert rec.mode is None
    assert rec.mode_step is None
    assert rec.value.tolist() == [9]


def _event_with_tensor(dtype: int, content: bytes, dims: list[int]) -> bytes:
    ev = messages().Event(step=9)
    val = ev.summary.value.add(tag="bad/tensor")
    val.tensor.dtype = dtype
    val.tensor.tensor_content = content
    for d in dims:
        val.tensor.tensor_shape.dim.add(size=d)
    return ev.SerializeToString()


def test_unknown_dtype_enum_names_file_step_and_tensor() -> None:
    with pytest.raises(FormatError, match="unknown dtype enum 99") as err:
        decode_event(_event_with_tensor(99, b"\x00" * 4, [1]), path="/run/e.tfevents")
    assert (err.value.path, err.value.step, err.value.tensor_name) == ("/run/e.tfevents", 9, "bad/tensor")
    assert "/run/e.tfevents" in str(err.value)


def test_content_not_matching_shape_is_refused() -> None:
    expected = r"tensor_content has 8 bytes, shape \[3\] of float32 needs 12"
    with pytest.raises(FormatError, match=expected) as err:
        decode_event(_event_with_tensor(1, b"\x00" * 8, [3]), path="/run/e.tfevents")
    assert err.value.tensor_name == "bad/tensor"


def test_negative_dimension_is_refused() -> None:
    with pytest.raises(FormatError, match="negative dimension"):
        decode_event(_event_with_tensor(1, b"\x00" * 4, [-1, -1]), path="p")


def test_malformed_protobuf_names_file() -> None:
    payload = encode_event("x", np.float32([1]), step=1, mode=TRAIN, mode_step=1)
    with pytest.raises(FormatError, match="malformed Event protobuf") as err:
        decode_event(payload[:-7], path="/run/e.tfevents")
    assert err.value.path == "/run/e.tfevents"


def test_event_without_tensor_and_bad_mode_are_refused() -> None:
    with pytest.raises(FormatError, match="expected one summary value per event, found 0"):
        decode_event(messages().Event(step=1).SerializeToString(), path="p")
    ev = messages().Event(step=1)
    ev.summary.value.add(tag="scalar", simple_value=1.0)
    with pytest.raises(FormatError, match="holds no tensor"):
        decode_event(ev.SerializeToString(), path="p")
    ev = messages().Event()
    ev.ParseFromString(encode_event("m", np.float32([1]), step=1, mode=TRAIN, mode_step=1))
    ev.summary.value[0].metadata.plugin_data[1].content = b"7"
    with pytest.raises(FormatError, match="bad mode plugin data"):
        decode_event(ev.SerializeToString(), path="p")


def test_read_record_then_decode_matches_record_length() -> None:
    rec = encode_record("x", np.arange(5, dtype=np.float64), step=2, mode=TRAIN, mode_step=2, wall_time=1.0)
    got = decode_event(read_record(rec, "f", 0, len(rec)))
    assert got.value.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_protobuf_classes_are_built_lazily_once() -> None:
    import subprocess
    import sys

    # GIVEN a fresh interpreter, importing every format module builds no message class
    code = (
        "import tornasole.format.event_records, tornasole.format.writer, tornasole.format.tensors\n"
        "from tornasole.format.proto import messages\n"
        "assert messages.cache_info().currsize == 0\n"
        "assert messages() is messages()\n"
        "print(messages().Event(step=5).SerializeToString().hex())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1005"  # field 2 (step), varint 5: TensorFlow's field number

"""The writer's direct encoder gives the protobuf encoder's bytes, for every value it accepts."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tornasole.format.event_encoding import encode_numeric_event, encode_numeric_record
from tornasole.format.event_records import decode_event
from tornasole.format.proto import messages
from tornasole.format.tensors import fill_tensor_proto
from tornasole.format.tfrecord import frame
from tornasole.modes import ModeKeys

VALUES = [
    np.float32(1.5),
    2.5,
    3,
    True,
    np.arange(6, dtype=np.int64).reshape(2, 3),
    np.zeros(()),
    np.zeros((0,)),
    np.zeros((3, 0, 2), dtype=np.int8),
    np.random.default_rng(0).random((300, 300)),  # multi-byte lengths at every level
    np.array([True, False]),
    np.arange(5, dtype=">i4"),  # big-endian input is written little-endian
    np.float16([1, 2]),
    np.complex64([1j]),
    np.uint64([2**63]),
    np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)),  # written in C order
    np.longdouble([1.25]),  # written as float64
]
TAGS = ["loss", "feature_importance/gain/f0", "ünï/çødé" + "x" * 200]


def _protobuf_event(tag, value, step, mode, mode_step, wall_time) -> bytes:
    """The generic encoder's bytes, built with protobuf messages."""
    ev = messages().Event(wall_time=wall_time, step=step)
    val = ev.summary.value.add(tag=tag)
    fill_tensor_proto(val.tensor, value, tag)
    plugins = val.metadata.plugin_data
    plugins.add(plugin_name="mode_step", content=str(mode_step).encode())
    plugins.add(plugin_name="mode", content=str(mode.value).encode())
    return ev.SerializeToString()


@pytest.mark.parametrize("value", VALUES, ids=lambda v: f"{np.asarray(v).dtype}{np.shape(v)}")
def test_direct_bytes_equal_protobuf_bytes(value):
    for tag, step, mode, mode_step, wall_time in itertools.product(
        TAGS, [0, 1, 127, 128, 2**40], list(ModeKeys), [0, 5, 300, -1], [1.0, 1795517963.942807, float("nan")]
    ):
        direct = encode_numeric_event(
            tag, value, step=step, mode_value=mode.value, mode_step=mode_step, wall_time=wall_time
        )
        expected = _protobuf_event(tag, value, step, mode, mode_step, wall_time)
        assert direct == expected, (tag, step, mode)
        framed = encode_numeric_record(
            tag, value, step=step, mode_value=mode.value, mode_step=mode_step, wall_time=wall_time
        )
        assert framed == frame(expected), (tag, step, mode)


def test_cached_parts_follow_each_record():
    """Records alternating between steps, times, modes and tags (the caches' keys) keep their own bytes."""
    cases = [
        ("a", np.float32([1.0]), 3, ModeKeys.TRAIN, 3, 10.0),
        ("a", np.float32([2.0]), 3, ModeKeys.TRAIN, 3, 10.0),
        ("b", np.float64([2.0]), 3, ModeKeys.TRAIN, 3, 10.0),
        ("a", np.float32([1.0]), 4, ModeKeys.TRAIN, 3, 10.0),
        ("a", np.float32([1.0]), 4, ModeKeys.EVAL, 3, 10.0),
        ("a", np.float32([1.0]), 4, ModeKeys.EVAL, 12345, 10.0),
        ("a", np.float32([1.0]), 4, ModeKeys.EVAL, 12345, 11.5),
        ("a", np.float32([1.0, 2.0]), 4, ModeKeys.EVAL, 12345, 11.5),
    ]
    for tag, value, step, mode, mode_step, wall_time in cases * 2:
        framed = encode_numeric_record(
            tag, value, step=step, mode_value=mode.value, mode_step=mode_step, wall_time=wall_time
        )
        assert framed == frame(_protobuf_event(tag, value, step, mode, mode_step, wall_time))


def test_declines_what_it_does_not_encode():
    kwargs = {"mode_value": 1, "mode_step": 0}
    assert encode_numeric_event("s", np.array(["a"]), step=1, wall_time=1.0, **kwargs) is None
    assert encode_numeric_event("x", np.zeros(2), step=-1, wall_time=1.0, **kwargs) is None
    assert encode_numeric_event("x", np.zeros(2), step=1, wall_time=0.0, **kwargs) is None
    assert encode_numeric_record("s", np.array(["a"]), step=1, wall_time=1.0, **kwargs) is None
    assert encode_numeric_record("x", np.zeros(2), step=-1, wall_time=1.0, **kwargs) is None


def test_direct_bytes_decode_back():
    value = np.arange(4, dtype=np.float32)
    payload = encode_numeric_event(
        "w", value, step=9, mode_value=ModeKeys.EVAL.value, mode_step=2, wall_time=3.0
    )
    rec = decode_event(payload)
    assert (rec.tag, rec.step, rec.mode, rec.mode_step, rec.wall_time) == ("w", 9, ModeKeys.EVAL, 2, 3.0)
    np.testing.assert_array_equal(rec.value, value)

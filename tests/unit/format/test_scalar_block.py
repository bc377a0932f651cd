"""A block of float32 scalars encoded from its layout gives the bytes of the per-record encoder, event file
and index alike, wherever it sits in the step and whatever the step, mode, wall time and values."""

from __future__ import annotations

import numpy as np
import pytest

from tornasole.format.event_records import decode_indexed_tensor
from tornasole.format.index import decode_index
from tornasole.format.scalar_block import encode_block
from tornasole.format.writer import StepWriter, TrialWriter
from tornasole.modes import ModeKeys

TAGS = [
    "smdebug/reductions/l2/embed.weight",
    "smdebug/reductions/abs_max/gradient/embed.weight",
    'odd "name" \\ with é unicode',
    "CrossEntropyLoss_output_0",
    "scalar/grad_norm/total",
]


def _values(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    v[1] = 0.0
    v[2] = np.nan
    v[3] = -np.inf
    return v


def _per_record(step, mode, mode_step, before, tags, values, after, wall_time) -> StepWriter:
    sw = StepWriter(step, "worker_0", mode=mode, mode_step=mode_step)
    sw.add_tensors(before)
    sw.add_tensors([(tag, values[i, ...], wall_time) for i, tag in enumerate(tags)])
    sw.add_tensors(after)
    return sw


def _block(step, mode, mode_step, before, tags, values, after, wall_time) -> StepWriter:
    sw = StepWriter(step, "worker_0", mode=mode, mode_step=mode_step)
    sw.add_tensors(before)
    sw.add_scalar_block(tags, values, wall_time)
    sw.add_tensors(after)
    return sw


CASES = [
    # step, mode, mode step, records before the block, after it
    (0, ModeKeys.TRAIN, 0, [], []),
    (5, ModeKeys.TRAIN, 5, [], []),
    (1_000_003, ModeKeys.EVAL, 70, [], []),
    (12, ModeKeys.GLOBAL, 12, [("x", np.arange(6, dtype=np.int32).reshape(2, 3), 1.5)], []),
    (12, ModeKeys.TRAIN, 3, [], [("scalar/lr/0", np.float32(3e-4), 1_700_000_000.25)]),
    (
        300,
        ModeKeys.PREDICT,
        299,
        [("a", np.float64(2.0), 1.0)],
        [("b", np.float32(1.0), 2.0), ("c", np.ones(3, np.float16), 2.0)],
    ),
]


@pytest.mark.parametrize(("step", "mode", "mode_step", "before", "after"), CASES)
def test_block_bytes_equal_the_per_record_encoders(step, mode, mode_step, before, after):
    values = _values(len(TAGS), seed=step)
    for wall_time in (1_700_000_000.123456, 1_700_000_001.5):  # the layout is reused across steps
        args = (step, mode, mode_step, before, TAGS, values, after, wall_time)
        expected, got = _per_record(*args), _block(*args)
        assert got.event_bytes() == expected.event_bytes()
        assert got.index_bytes() == expected.index_bytes()


def test_the_block_reads_back_through_the_index(tmp_path):
    values = _values(len(TAGS), seed=3)
    tw = TrialWriter(str(tmp_path))
    sw = tw.step_writer(7, ModeKeys.TRAIN, 7)
    sw.add_tensors([("first", np.float32(9.0), 5.0)])
    sw.add_scalar_block(TAGS, values, 5.0)
    tw.write_step(sw)
    path = tmp_path / sw.index_file_name
    index = decode_index(path.read_bytes(), str(path))
    assert [e.tensorname for e in index.tensors] == ["first", *TAGS]
    events = (tmp_path / sw.event_file_name).read_bytes()
    for entry, value in zip(index.tensors[1:], values):
        got = decode_indexed_tensor(events, entry.start_idx, entry.length, entry.tensorname)
        np.testing.assert_array_equal(got, value)
        assert got.dtype == np.float32
        assert got.shape == ()


def test_what_the_block_cannot_take_is_written_record_by_record():
    tags = ["a", "b"]
    values = np.array([1.0, 2.0])  # float64
    assert encode_block(tags, values, step=1, mode_value=1, mode_step=1, wall_time=1.0, offset=0) is None
    expected = StepWriter(1, "worker_0")
    expected.add_tensors([("a", values[0, ...], 1.0), ("b", values[1, ...], 1.0)])
    got = StepWriter(1, "worker_0")
    got.add_scalar_block(tags, values, 1.0)
    assert got.event_bytes() == expected.event_bytes()
    assert got.index_bytes() == expected.index_bytes()
    with pytest.raises(ValueError, match="step 1: add_scalar_block got 3 tags for 2 values"):
        got.add_scalar_block(["a", "b", "c"], values, 1.0)


def test_an_empty_block_adds_nothing():
    sw = StepWriter(1, "worker_0")
    sw.add_scalar_block([], np.zeros(0, np.float32), 1.0)
    assert sw.is_empty

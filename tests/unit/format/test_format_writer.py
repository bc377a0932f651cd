"""StepWriter / TrialWriter: what is written, where, and in which order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tornasole.format.collections import decode_collections
from tornasole.format.event_records import decode_event
from tornasole.format.index import decode_index
from tornasole.format.tfrecord import iter_records, read_record
from tornasole.format.writer import StepWriter, TrialWriter
from tornasole.modes import ModeKeys


class RecordingStorage:
    """Only ``write_atomic`` is used by the writer; remember every call in order."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, bytes]] = []

    def write_atomic(self, path: str, data: bytes) -> None:
        self.writes.append((path, data))


def _step(step: int = 5, worker: str = "worker_0") -> StepWriter:
    sw = StepWriter(step, worker, mode=ModeKeys.TRAIN, mode_step=3)
    sw.add_tensor("w", np.arange(6, dtype=np.float32).reshape(2, 3), wall_time=1.0)
    sw.add_shape("w", (2, 3))
    sw.add_tensor("smdebug/reductions/mean/w", np.float32(2.5), wall_time=1.5)
    sw.add_tensor("lr", 0.1, mode=ModeKeys.EVAL, mode_step=0, wall_time=2.0)
    return sw


def test_step_writer_offsets_index_and_records_agree() -> None:
    sw = _step()
    events = sw.event_bytes()
    index = decode_index(sw.index_bytes(), sw.index_file_name)
    assert (index.mode, index.mode_step, index.event_file_name) == (ModeKeys.TRAIN, 3, sw.event_file_name)
    assert [e.tensorname for e in index.tensors] == ["w", "smdebug/reductions/mean/w", "lr"]
    assert [e.start_idx for e in index.tensors] == [off for off, _ in iter_records(events, "mem")]
    assert sum(e.length for e in index.tensors) == len(events)
    assert [(s.tensorname, s.shape) for s in index.shapes] == [("w", (2, 3))]
    last = index.tensors[-1]
    rec = decode_event(read_record(events, "mem", last.start_idx, last.length))
    assert (rec.tag, rec.step, rec.mode, rec.mode_step, rec.value.tolist()) == (
        "lr",
        5,
        ModeKeys.EVAL,
        0,
        [0.1],
    )


def test_meta_comes_from_first_tensor_even_after_a_shape() -> None:
    sw = StepWriter(8, "worker_1")
    sw.add_shape("a", (1,), mode=ModeKeys.PREDICT, mode_step=1)
    assert sw.index().event_file_name is None  # shapes only: no event file
    sw.add_tensor("a", np.int64([1]), mode=ModeKeys.EVAL, mode_step=4)
    idx = sw.index()
    assert (idx.mode, idx.mode_step, idx.event_file_name) == (ModeKeys.EVAL, 4, sw.event_file_name)


def test_defaults_are_global_and_mode_step_equals_step() -> None:
    sw = StepWriter(12, "worker_0")
    sw.add_tensor("x", np.float32([1]))
    rec = decode_event(next(iter_records(sw.event_bytes(), "mem"))[1])
    assert (rec.mode, rec.mode_step) == (ModeKeys.GLOBAL, 12)
    assert sw.index().mode_step == 12


def test_empty_step_has_no_index() -> None:
    sw = StepWriter(1, "worker_0")
    assert sw.is_empty
    assert sw.event_bytes() == b""
    with pytest.raises(ValueError, match="nothing was added"):
        sw.index_bytes()


def test_trial_writer_publishes_in_contract_order() -> None:
    storage = RecordingStorage()
    tw = TrialWriter("s3://bucket/run", worker="worker_1", storage=storage)
    tw.write_step(_step(5, "worker_1"))
    tw.write_step(StepWriter(6, "worker_1"))  # empty: nothing written
    tw.write_collections({"losses": {"name": "losses"}}, num_workers=2)
    tw.write_end_marker()
    assert [p for p, _ in storage.writes] == [
        "s3://bucket/run/events/000000000005/000000000005_worker_1.tfevents",
        "s3://bucket/run/index/000000000/000000000005_worker_1.json",
        "s3://bucket/run/collections/000000000/worker_1_collections.json",
        "s3://bucket/run/training_job_end.ts",
    ]
    assert storage.writes[-1][1] == b""
    assert decode_collections(storage.writes[2][1], "c") == ({"losses": {"name": "losses"}}, 2)


def test_shapes_only_step_writes_only_an_index() -> None:
    storage = RecordingStorage()
    sw = StepWriter(3, "worker_0")
    sw.add_shape("a", (4,))
    TrialWriter("/run", storage=storage).write_step(sw)
    assert [p for p, _ in storage.writes] == ["/run/index/000000000/000000000003_worker_0.json"]


def test_collections_once_and_nothing_after_end_marker() -> None:
    tw = TrialWriter("/run", storage=RecordingStorage())
    tw.write_collections({}, 1)
    with pytest.raises(RuntimeError, match="already written"):
        tw.write_collections({}, 1)
    tw.write_end_marker()
    with pytest.raises(RuntimeError, match="end marker"):
        tw.write_step(_step())


def test_local_trial_on_disk(tmp_path: Path) -> None:
    tw = TrialWriter(str(tmp_path))
    sw = tw.step_writer(1234, mode=ModeKeys.TRAIN, mode_step=1000)
    sw.add_tensor("s", np.array(["a", "bc"]))
    tw.write_step(sw)
    tw.write_collections({}, 1)
    tw.write_end_marker()
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert files == [
        "collections/000000000/worker_0_collections.json",
        "events/000000001234/000000001234_worker_0.tfevents",
        "index/000000001/000000001234_worker_0.json",
        "training_job_end.ts",
    ]
    index = decode_index((tmp_path / files[2]).read_bytes(), files[2])
    payload = read_record((tmp_path / index.event_file_name).read_bytes(), "e", 0, index.tensors[0].length)
    assert decode_event(payload).value.tolist() == ["a", "bc"]


@pytest.mark.parametrize("step", [0, 1, 300, 2**40])
@pytest.mark.parametrize("mode", [ModeKeys.GLOBAL, ModeKeys.EVAL])
def test_add_tensors_writes_what_add_tensor_writes_one_by_one(step, mode):
    from tests.unit.format.test_format_event_encoding import VALUES

    values = [*VALUES, np.array(["a", "bc"]), "text", np.float64([0.25]), np.float64([0.25])]
    times = [1.0, 1.0, 1795517963.942807, float("nan"), 2.5]
    items = [(f"t{i % 7}/{i}", v, times[i % len(times)]) for i, v in enumerate(values)]
    items.append(("same", np.float32([1.0]), 3.0))
    items.append(("same", np.float32([2.0]), 3.0))  # a tag twice, as a hook may save it
    one, many = StepWriter(step, "worker_0", mode=mode), StepWriter(step, "worker_0", mode=mode)
    for tag, value, wall_time in items:
        one.add_tensor(tag, value, wall_time=wall_time)
    many.add_tensors(items)
    assert many.event_bytes() == one.event_bytes()
    assert many.index_bytes() == one.index_bytes()


def test_add_tensors_after_shapes_and_of_nothing():
    one, many = StepWriter(3, "worker_0"), StepWriter(3, "worker_0")
    for sw in (one, many):
        sw.add_shape("w", (2, 3))
    many.add_tensors([])
    assert many.is_empty is False
    assert many.has_tensors is False
    one.add_tensor("x", np.int32([7]), wall_time=4.0)
    many.add_tensors([("x", np.int32([7]), 4.0)])
    assert (many.event_bytes(), many.index_bytes()) == (one.event_bytes(), one.index_bytes())

"""Bad input raises a tornasole exception naming file, step and tensor; other steps stay readable."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from trial_builder import make_trial_dir, tensor_value, write_collections, write_step

from tornasole.exceptions import FormatError, IndexReaderException
from tornasole.format.index import IndexEntry, StepIndex, encode_index
from tornasole.format.proto import messages
from tornasole.format.tfrecord import frame
from tornasole.modes import GLOBAL
from tornasole.trials import StepState, create_trial

EVENT_1 = "events/000000000001/000000000001_worker_0.tfevents"
INDEX_1 = "index/000000000/000000000001_worker_0.json"


def _trial_dir(tmp_path) -> str:
    return make_trial_dir(str(tmp_path / "run"), [0, 1, 2])


def _others_still_readable(trial) -> None:
    for step in (0, 2):
        for name in ("dense.weight", "loss"):
            assert np.array_equal(trial.tensor(name).value(step), tensor_value(step, "worker_0", name))


def _index(d: str) -> dict:
    with open(os.path.join(d, INDEX_1)) as f:
        return json.load(f)


def _rewrite_index(d: str, doc: dict) -> None:
    with open(os.path.join(d, INDEX_1), "w") as f:
        json.dump(doc, f)


def _corrupt_event(d: str, offset: int) -> None:
    path = os.path.join(d, EVENT_1)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[offset] ^= 0xFF
    with open(path, "wb") as f:
        f.write(bytes(data))


def test_truncated_event_file(tmp_path):
    d = _trial_dir(tmp_path)
    path = os.path.join(d, EVENT_1)
    os.truncate(path, os.path.getsize(path) - 10)
    trial = create_trial(d)
    with pytest.raises(IndexReaderException, match="past the end of the event file") as info:
        trial.tensor("loss").value(1)
    err = info.value
    assert err.path == path
    assert err.step == 1
    assert err.tensor_name == "loss"
    assert INDEX_1 in str(err)
    _others_still_readable(trial)


def test_truncated_event_file_in_a_bulk_fetch(tmp_path):
    d = _trial_dir(tmp_path)
    path = os.path.join(d, EVENT_1)
    os.truncate(path, os.path.getsize(path) - 10)
    trial = create_trial(d)
    # GIVEN both records of step 1 are fetched in one ranged read of the truncated file
    assert trial.prefetch(["dense.weight", "loss"], [0, 1, 2]) == 5
    # THEN the intact record is served and only the cut one fails
    assert np.array_equal(trial.tensor("dense.weight").value(1), tensor_value(1, "worker_0", "dense.weight"))
    with pytest.raises(IndexReaderException, match="past the end") as info:
        trial.tensor("loss").value(1)
    assert info.value.tensor_name == "loss"
    _others_still_readable(trial)


def test_wrong_length_crc(tmp_path):
    d = _trial_dir(tmp_path)
    _corrupt_event(d, 9)  # inside the first record's length CRC
    trial = create_trial(d)
    with pytest.raises(IndexReaderException, match="length CRC mismatch") as info:
        trial.tensor("dense.weight").value(1)
    assert info.value.step == 1
    assert info.value.tensor_name == "dense.weight"
    assert EVENT_1 in str(info.value)
    # the other record of the same file is still readable
    assert np.array_equal(trial.tensor("loss").value(1), tensor_value(1, "worker_0", "loss"))
    _others_still_readable(trial)


def test_wrong_payload_crc(tmp_path):
    d = _trial_dir(tmp_path)
    first = _index(d)["tensor_payload"][0]
    _corrupt_event(d, first["start_idx"] + first["length"] - 1)  # the footer
    trial = create_trial(d)
    with pytest.raises(IndexReaderException, match="payload CRC mismatch"):
        trial.tensor("dense.weight").value(1)
    _others_still_readable(trial)


def test_index_pointing_past_the_end_of_its_event_file(tmp_path):
    d = _trial_dir(tmp_path)
    doc = _index(d)
    doc["tensor_payload"][1]["start_idx"] = 100_000
    _rewrite_index(d, doc)
    trial = create_trial(d)
    with pytest.raises(IndexReaderException, match="past the end") as info:
        trial.tensor("loss").value(1)
    assert "offset 100000" in str(info.value)
    assert info.value.offset == 100_000
    _others_still_readable(trial)


def test_index_entry_pointing_at_another_tensor(tmp_path):
    d = _trial_dir(tmp_path)
    doc = _index(d)
    doc["tensor_payload"][1]["start_idx"] = 0
    doc["tensor_payload"][1]["length"] = doc["tensor_payload"][0]["length"]
    _rewrite_index(d, doc)
    trial = create_trial(d)
    with pytest.raises(IndexReaderException, match="record holds tensor 'dense.weight', not 'loss'"):
        trial.tensor("loss").value(1)


@pytest.mark.parametrize(
    "content", [b"{not json", b'{"meta": {"mode": "NOPE", "mode_step": 1}, "tensor_payload": []}']
)
def test_malformed_index_is_a_bad_step_and_other_steps_load(tmp_path, content):
    d = _trial_dir(tmp_path)
    with open(os.path.join(d, INDEX_1), "wb") as f:
        f.write(content)
    trial = create_trial(d)
    assert trial.steps() == [0, 2]
    assert list(trial.bad_steps) == [(1, "worker_0")]
    # the step was written (unreadably): waiting for it returns, reading it raises its error
    assert trial.has_passed_step(1) == StepState.AVAILABLE
    trial.wait_for_steps([1])
    with pytest.raises(IndexReaderException) as info:
        trial.tensor("loss").value(1)
    assert info.value.step == 1
    assert info.value.path.endswith(INDEX_1)
    _others_still_readable(trial)


def test_malformed_collections_json_names_the_file(tmp_path):
    d = str(tmp_path / "run")
    write_step(d, 0)
    path = os.path.join(d, "collections/000000000/worker_0_collections.json")
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        f.write('{"collections": [')
    with pytest.raises(FormatError, match="malformed collections JSON") as info:
        create_trial(d)
    assert info.value.path == path


def test_missing_event_file_behind_an_index(tmp_path):
    d = _trial_dir(tmp_path)
    os.remove(os.path.join(d, EVENT_1))
    trial = create_trial(d)
    with pytest.raises(IndexReaderException, match="event file is missing") as info:
        trial.tensor("loss").value(1)
    assert info.value.path == os.path.join(d, EVENT_1)
    assert info.value.step == 1
    assert info.value.tensor_name == "loss"
    _others_still_readable(trial)


def _write_raw_record(d: str, step: int, tag: str, build) -> None:
    """An event file with one hand-built record, and its index."""
    ev = messages().Event()
    ev.step = step
    val = ev.summary.value.add()
    val.tag = tag
    build(val.tensor)
    record = frame(ev.SerializeToString())
    rel = f"events/{step:012d}/{step:012d}_worker_0.tfevents"
    os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
    with open(os.path.join(d, rel), "wb") as f:
        f.write(record)
    idx = StepIndex(GLOBAL, step, rel, [IndexEntry(tag, 0, len(record))], [])
    path = os.path.join(d, f"index/000000000/{step:012d}_worker_0.json")
    with open(path, "wb") as f:
        f.write(encode_index(idx))


def test_unknown_dtype_and_shape_content_mismatch(tmp_path):
    d = _trial_dir(tmp_path)

    def unknown_dtype(t):
        t.dtype = 99
        t.tensor_shape.dim.add().size = 1
        t.tensor_content = b"\0\0\0\0"

    def wrong_shape(t):
        t.dtype = 1  # DT_FLOAT
        t.tensor_shape.dim.add().size = 3
        t.tensor_content = b"\0" * 8

    _write_raw_record(d, 5, "odd", unknown_dtype)
    _write_raw_record(d, 6, "odd", wrong_shape)
    trial = create_trial(d)
    with pytest.raises(IndexReaderException, match="unknown dtype enum 99") as info:
        trial.tensor("odd").value(5)
    assert info.value.step == 5
    with pytest.raises(IndexReaderException, match="tensor_content has 8 bytes") as info:
        trial.tensor("odd").value(6)
    assert info.value.tensor_name == "odd"
    _others_still_readable(trial)


def test_bad_index_of_one_worker_does_not_hide_the_other_workers_step(tmp_path):
    d = str(tmp_path / "run")
    for w in ("worker_0", "worker_1"):
        write_collections(d, num_workers=2, worker=w)
        for s in (0, 1):
            write_step(d, s, worker=w)
    with open(os.path.join(d, "index/000000000/000000000000_worker_1.json"), "w") as f:
        f.write("[]")
    trial = create_trial(d)
    assert trial.steps() == [0, 1]  # step 0 settled: step 1 is complete
    assert trial.tensor("loss").value(0, worker="worker_0").shape == (2, 3)
    with pytest.raises(IndexReaderException, match="must be a JSON object"):
        trial.tensor("loss").value(0, worker="worker_1")


def test_an_event_file_completed_after_a_failed_read_is_read_on_the_next_call(tmp_path):
    # GIVEN a local trial whose step-1 event file is cut short when first read
    d = _trial_dir(tmp_path)
    path = os.path.join(d, EVENT_1)
    with open(path, "rb") as f:
        full = f.read()
    cut = path + ".cut"
    with open(cut, "wb") as f:
        f.write(full[:-10])
    os.replace(cut, path)
    trial = create_trial(d)
    with pytest.raises(IndexReaderException, match="past the end"):
        trial.tensor("loss").value(1)
    # WHEN the complete file is published (renamed over the path)
    done = path + ".done"
    with open(done, "wb") as f:
        f.write(full)
    os.replace(done, path)
    # THEN the failed read's second look maps the file now there
    np.testing.assert_array_equal(trial.tensor("loss").value(1), tensor_value(1, "worker_0", "loss"))

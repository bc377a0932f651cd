"""An index file joined from JSON pieces (a scalar block's entries formatted once) holds the bytes of
``json.dumps`` of smdebug's dict, meta included, and a trial directory's paths are those of ``join``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tornasole.format.index import IndexEntry, ShapeEntry, index_file_bytes, tensor_payload
from tornasole.format.writer import StepWriter, TrialWriter
from tornasole.modes import ModeKeys
from tornasole.storage.local import LocalStorage


def _dumps(mode, mode_step, efn, entries, shapes) -> bytes:
    meta = {"mode": mode.name, "mode_step": mode_step}
    if efn is not None:
        meta["event_file_name"] = efn
    return json.dumps(
        {
            "meta": meta,
            "tensor_payload": [
                {"tensorname": e.tensorname, "start_idx": e.start_idx, "length": e.length} for e in entries
            ],
            "shape_payload": [
                {"tensorname": s.tensorname, "originalname": s.originalname, "shape": list(s.shape)}
                for s in shapes
            ],
        }
    ).encode()


@pytest.mark.parametrize("efn", ["events/000000000007/000000000007_worker_0.tfevents", 'ev "ü\\/"\n', None])
@pytest.mark.parametrize("mode_step", [0, 7, 2**40, True])
def test_the_joined_file_is_json_dumps_of_smdebugs_dict(efn, mode_step):
    entries = [IndexEntry("a", 0, 80), IndexEntry('b "é"', 80, 90), IndexEntry("c", 170, 85)]
    shapes = [ShapeEntry("s", "orig/ü", (2, 0))]
    pieces = [tensor_payload(entries[:1]).encode(), b"", tensor_payload(entries[1:]).encode()]
    for mode in (ModeKeys.TRAIN, ModeKeys.GLOBAL):
        expected = _dumps(mode, mode_step, efn, entries, shapes)
        assert index_file_bytes(mode, mode_step, efn, pieces, shapes) == expected
        assert index_file_bytes(mode, mode_step, efn, [], []) == _dumps(mode, mode_step, efn, [], [])


def test_a_step_with_records_around_blocks_indexes_each_record_once():
    sw = StepWriter(3, "worker_0", mode=ModeKeys.TRAIN, mode_step=1)
    sw.add_tensors([("before", np.float32(1.0), 1.0)])
    sw.add_scalar_block(["b1", "b2"], np.array([1.0, 2.0], np.float32), 1.0)
    sw.add_scalar_block(["c1"], np.array([3.0], np.float32), 1.0)
    sw.add_tensors([("after", np.float32(2.0), 1.0)])
    sw.add_shape("shape_only", (4,))
    doc = json.loads(sw.index_bytes())
    names = [e["tensorname"] for e in doc["tensor_payload"]]
    assert names == ["before", "b1", "b2", "c1", "after"]
    starts = [e["start_idx"] for e in doc["tensor_payload"]]
    lengths = [e["length"] for e in doc["tensor_payload"]]
    assert starts == [0, *np.cumsum(lengths)[:-1].tolist()]
    assert sum(lengths) == len(sw.event_bytes())
    assert doc["shape_payload"] == [{"tensorname": "shape_only", "originalname": "shape_only", "shape": [4]}]
    assert sw.index_bytes() == _dumps(
        ModeKeys.TRAIN, 1, sw.event_file_name, sw.index().tensors, sw.index().shapes
    )


@pytest.mark.parametrize("suffix", ["", "/"])
def test_step_files_land_where_join_puts_them(tmp_path: Path, suffix: str):
    trial = str(tmp_path / "run") + suffix
    tw = TrialWriter(trial, storage=LocalStorage())
    sw = tw.step_writer(12)
    sw.add_tensor("x", np.float32(1.0), wall_time=1.0)
    tw.write_step(sw)
    assert (tmp_path / "run" / "events" / "000000000012" / "000000000012_worker_0.tfevents").is_file()
    assert (tmp_path / "run" / "index" / "000000000" / "000000000012_worker_0.json").is_file()

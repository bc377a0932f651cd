"""The trial's index is made of objects the garbage collector can stop tracking.

A trial holds one record location per saved record and one entry per tensor
per step (100,000 and 50,000 for 1,000 steps of 50 tensors with reductions).
Had they stayed tracked, every full collection of the process (triggered by
any allocation, the user's included) would traverse them all: about half the
time of opening such a trial and up to a third of reading it went to the
collector. Plain tuples of strings and ints, and tuples of those, are untracked
by the collections that see them; these tests hold the index to that,
for the common index and for the unusual ones (reductions, shapes, repeated and
malformed entries), and check the reader still answers through them.
"""

from __future__ import annotations

import gc
import json
import os

import numpy as np
import pytest
from trial_builder import make_trial_dir, tensor_value

from tornasole.exceptions import IndexReaderException
from tornasole.trials import create_trial
from tornasole.trials.step_index import (
    ENTRY_ERROR,
    ENTRY_LOCATION,
    ENTRY_REDUCTIONS,
    LOC_START,
    LOC_TAG,
    entry_locations,
    entry_reductions,
    reduction_location,
)


def _all_entries(trial):
    table = trial._table
    for step in table.steps():
        for tensors in table.record(step).workers.values():
            yield from tensors.items()


@pytest.mark.parametrize("reductions", [False, True])
def test_locations_and_entries_are_untracked_after_a_collection(tmp_path, reductions):
    path = make_trial_dir(str(tmp_path / "t"), range(0, 30, 3), workers=2, reductions=reductions)
    trial = create_trial(path)
    trial.steps()
    # A tuple is untracked when its elements already are at that point of the collector's pass, which
    # meets a tuple before its elements: one full collection for each level (entry, reductions, location).
    for _ in range(3):
        gc.collect()
    entries = list(_all_entries(trial))
    assert len(entries) == 10 * 2 * 2  # steps x workers x tensors
    for name, entry in entries:
        assert type(entry) is tuple, name
        assert not gc.is_tracked(entry), name
        for loc in entry_locations(entry):
            assert type(loc) is tuple, name
            assert not gc.is_tracked(loc), name
        assert len(entry_reductions(entry)) == (2 if reductions else 0)
    # what the collector no longer sees still answers every question
    t = trial.tensor("dense.weight")
    np.testing.assert_array_equal(t.value(9, worker="worker_1"), tensor_value(9, "worker_1", "dense.weight"))
    if reductions:
        want = np.abs(tensor_value(9, "worker_0", "dense.weight")).max()
        assert t.reduction_value(9, "max", abs=True) == pytest.approx(want)
        assert set(t.reduction_values(9)) == {("mean", False), ("max", True)}


def _rewrite_index(trial_dir: str, step: int, edit) -> None:
    index_dir = os.path.join(trial_dir, "index", "000000000")
    name = next(n for n in sorted(os.listdir(index_dir)) if n.startswith(f"{step:012d}_"))
    with open(os.path.join(index_dir, name), encoding="utf-8") as f:
        doc = json.load(f)
    edit(doc)
    with open(os.path.join(index_dir, name), "w", encoding="utf-8") as f:
        json.dump(doc, f)


def test_unusual_index_entries_keep_their_meaning(tmp_path):
    """Repeated tags, a malformed value entry, a malformed reduction entry, a shape-only tensor."""
    path = make_trial_dir(str(tmp_path / "t"), [0], reductions=True)

    def edit(doc):
        payload = doc["tensor_payload"]
        by_tag = {e["tensorname"]: e for e in payload}
        loss = dict(by_tag["loss"])
        # a malformed value entry of dense.weight after its good one: reading it raises
        payload.append({"tensorname": "dense.weight", "start_idx": -1, "length": 5})
        # loss listed twice: the last entry wins (its first entry made malformed, then a good copy)
        payload.insert(0, {"tensorname": "loss", "start_idx": 0, "length": 1})
        payload.append(loss)
        # a malformed reduction entry of a tensor with no value: the tensor is listed and says why
        payload.append({"tensorname": "smdebug/reductions/mean/only_reduced", "start_idx": 0, "length": 1})
        doc["shape_payload"] = [{"tensorname": "shape_only", "originalname": "shape_only", "shape": [4, 2]}]

    _rewrite_index(path, 0, edit)
    trial = create_trial(path)
    assert {"dense.weight", "loss", "only_reduced", "shape_only"} <= set(trial.tensor_names())
    np.testing.assert_array_equal(trial.tensor("loss").value(0), tensor_value(0, "worker_0", "loss"))
    with pytest.raises(IndexReaderException, match="cannot read this tensor"):
        trial.tensor("dense.weight").value(0)
    # the reductions saved before the malformed value entry are still read
    want = tensor_value(0, "worker_0", "dense.weight").mean()
    assert trial.tensor("dense.weight").reduction_value(0, "mean") == pytest.approx(want)
    with pytest.raises(IndexReaderException, match="cannot read this tensor"):
        trial.tensor("only_reduced").value(0)
    assert trial.tensor("shape_only").shape(0) == (4, 2)
    entry = trial._table.tensor_entries("only_reduced")[0]
    assert entry[ENTRY_LOCATION] is None
    assert entry[ENTRY_REDUCTIONS] == ()
    assert isinstance(entry[ENTRY_ERROR], IndexReaderException)


def test_reduction_location_finds_each_saved_reduction(tmp_path):
    path = make_trial_dir(str(tmp_path / "t"), [0], reductions=True)
    entry = create_trial(path)._table.tensor_entries("loss")[0]
    mean = reduction_location(entry, ("mean", False))
    assert mean[LOC_TAG] == "smdebug/reductions/mean/loss"
    assert reduction_location(entry, ("max", True))[LOC_TAG] == "smdebug/reductions/abs_max/loss"
    assert reduction_location(entry, ("mean", True)) is None
    assert [key for key, _ in entry_reductions(entry)] == [("mean", False), ("max", True)]
    starts = [loc[LOC_START] for loc in entry_locations(entry)]
    assert starts[0] == entry[ENTRY_LOCATION][LOC_START]
    assert len(starts) == 3

"""smdebug's trial constructors and its tolerance of malformed index entries, ported as scenarios."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from trial_builder import make_trial_dir, write_collections, write_end, write_step

from tornasole.exceptions import IndexReaderException, TensorUnavailableForStep
from tornasole.modes import EVAL, TRAIN
from tornasole.trials import LocalTrial, StepState, Trial, create_trial


def _check_every_value(trial: Trial, num_steps: int, names: list[str]) -> None:
    assert trial.tensor_names() == sorted(names)
    for name in trial.tensor_names():
        assert len(trial.tensor(name).steps()) == num_steps
        for step in trial.tensor(name).steps():
            assert trial.tensor(name).value(step) is not None


def test_local_trial_built_with_smdebugs_keywords(tmp_path):
    names = [f"foo_{i}" for i in range(10)]
    d = make_trial_dir(str(tmp_path / "ts_output" / "run"), range(20), names=names)
    trial = LocalTrial(name="run", dirname=d)
    assert isinstance(trial, LocalTrial)
    assert (trial.name, trial.path, trial.trial_dir) == ("run", d, d)
    _check_every_value(trial, 20, names)


def test_local_trial_built_positionally_with_range_steps_and_smdebug_flags(tmp_path):
    d = make_trial_dir(str(tmp_path / "run"), range(6))
    trial = LocalTrial("run", d + "/", (2, 4), True, False, True, False)
    assert trial.path == d
    assert trial.steps() == [2, 3]
    np.testing.assert_array_equal(trial.tensor("loss").value(3), create_trial(d).tensor("loss").value(3))


def test_local_trial_rejects_an_unknown_keyword(tmp_path):
    with pytest.raises(TypeError):
        LocalTrial("run", make_trial_dir(str(tmp_path / "run"), [0]), colour="red")


def _dummy_index(trial_dir: str, step: int, mode: str, mode_step: int, worker: str = "worker_0") -> None:
    """An index file as smdebug's scenario tests write it: valid meta, an entry no record can match."""
    doc = {
        "meta": {"mode": mode, "mode_step": mode_step, "event_file_name": ""},
        "tensor_payload": [{"tensorname": "gradients/dummy:0", "start_idx": 0, "length": 1}],
    }
    path = os.path.join(trial_dir, "index", f"{step // 1000:09d}", f"{step:012d}_{worker}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f)


def _two_mode_trial(trial_dir: str, ended: bool) -> None:
    write_collections(trial_dir)
    for i in range(0, 31, 10):
        _dummy_index(trial_dir, i, "TRAIN", i)
        _dummy_index(trial_dir, i + 40, "EVAL", i)
    if ended:
        write_end(trial_dir)


def test_steps_with_unreadable_entries_keep_their_modes_on_a_finished_trial(tmp_path):
    # GIVEN a finished single-worker trial whose index entries point at no record
    d = str(tmp_path / "run")
    _two_mode_trial(d, ended=True)
    trial = create_trial(d)
    # THEN every step and mode step is known, as in smdebug
    assert trial.workers() == ["worker_0"]
    assert trial.loaded_all_steps
    assert trial.steps(show_incomplete_steps=True) == [0, 10, 20, 30, 40, 50, 60, 70]
    assert trial.steps() == trial.steps(show_incomplete_steps=True)
    assert trial.steps(mode=EVAL) == [0, 10, 20, 30]
    assert trial.has_passed_step(30) == StepState.AVAILABLE
    assert trial.has_passed_step(23, mode=TRAIN) == StepState.UNAVAILABLE
    assert trial.has_passed_step(40, mode=TRAIN) == StepState.UNAVAILABLE
    assert trial.has_passed_step(30, mode=EVAL) == StepState.AVAILABLE
    assert trial.has_passed_step(23, mode=EVAL) == StepState.UNAVAILABLE
    assert trial.has_passed_step(80) == StepState.UNAVAILABLE
    assert trial.has_passed_step(80, mode=EVAL) == StepState.UNAVAILABLE
    assert trial.last_index_token == os.path.join(d, "index/000000000/000000000070_worker_0.json")
    assert trial.last_complete_step == 70
    assert trial.bad_steps == {}
    # AND reading the tensor fails, naming the index file, the step, the tensor and the reason
    assert trial.tensor_names() == ["gradients/dummy:0"]
    with pytest.raises(IndexReaderException, match="cannot hold a record") as info:
        trial.tensor("gradients/dummy:0").value(10, mode=EVAL)
    assert info.value.step == 50
    assert info.value.tensor_name == "gradients/dummy:0"
    assert info.value.path.endswith("000000000050_worker_0.json")
    with pytest.raises(IndexReaderException, match="cannot hold a record"):
        trial.tensor("gradients/dummy:0").values()


def test_steps_with_unreadable_entries_on_a_live_trial(tmp_path):
    d = str(tmp_path / "run")
    _two_mode_trial(d, ended=False)
    trial = create_trial(d)
    assert not trial.loaded_all_steps
    assert trial.has_passed_step(30, mode=EVAL) == StepState.AVAILABLE
    assert trial.has_passed_step(23, mode=EVAL) == StepState.UNAVAILABLE
    assert trial.has_passed_step(80, mode=EVAL) == StepState.NOT_YET_AVAILABLE
    assert trial.last_complete_step == 70


def test_one_malformed_entry_leaves_the_other_tensors_of_its_step_readable(tmp_path):
    d = str(tmp_path / "run")
    write_collections(d)
    write_step(d, 0, reductions=True)
    index = os.path.join(d, "index", "000000000", "000000000000_worker_0.json")
    with open(index) as f:
        doc = json.load(f)
    for e in doc["tensor_payload"]:
        if e["tensorname"] == "dense.weight":
            e["start_idx"] = -5
        if e["tensorname"] == "smdebug/reductions/mean/loss":
            e["length"] = "many"
    doc["tensor_payload"].append({"start_idx": 0, "length": 40})  # no name: skipped
    with open(index, "w") as f:
        json.dump(doc, f)
    write_end(d)
    trial = create_trial(d)
    assert trial.steps() == [0]
    assert trial.tensor_names() == ["dense.weight", "loss"]
    with pytest.raises(IndexReaderException, match="negative start_idx -5"):
        trial.tensor("dense.weight").value(0)
    with pytest.raises(IndexReaderException, match="negative start_idx -5"):
        trial.tensor("dense.weight").reduction_value(0, "max")
    assert trial.tensor("loss").value(0).shape == (2, 3)
    # the bad reduction record is not there: it is computed from the value instead
    want = trial.tensor("loss").value(0).mean()
    np.testing.assert_allclose(trial.tensor("loss").reduction_value(0, "mean"), want)


def test_a_step_with_only_shape_entries_still_says_what_was_not_saved(tmp_path):
    d = make_trial_dir(str(tmp_path / "run"), [0], reductions=True, names=["w"])
    index = os.path.join(d, "index", "000000000", "000000000000_worker_0.json")
    with open(index) as f:
        doc = json.load(f)
    doc["tensor_payload"] = [e for e in doc["tensor_payload"] if e["tensorname"] != "w"]
    with open(index, "w") as f:
        json.dump(doc, f)
    with pytest.raises(TensorUnavailableForStep, match="reductions saved"):
        create_trial(d).tensor("w").value(0)

"""The Trial / Tensor query API over trials written with the format writer."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from trial_builder import RecordingStorage, make_trial_dir, tensor_value, write_collections, write_step

from tornasole import modes
from tornasole.exceptions import InvalidWorker, TensorUnavailable, TensorUnavailableForStep
from tornasole.format.writer import TrialWriter
from tornasole.trials import LocalTrial, create_trial
from tornasole.trials.caches import ValueCache


@pytest.fixture
def moded_dir(tmp_path) -> str:
    """TRAIN steps 0..3 (global 0..3), EVAL steps 0..1 (global 4, 5), TRAIN 4 (global 6)."""
    d = str(tmp_path / "moded")
    write_collections(d)
    for g in range(4):
        write_step(d, g, mode=modes.TRAIN, mode_step=g, reductions=True)
    write_step(d, 4, mode=modes.EVAL, mode_step=0, names=("loss",))
    write_step(d, 5, mode=modes.EVAL, mode_step=1, names=("loss", "eval_only"))
    write_step(d, 6, mode=modes.TRAIN, mode_step=4)
    TrialWriter(d).write_end_marker()
    return d


def test_create_trial_names_and_options(tmp_path):
    d = make_trial_dir(str(tmp_path / "my_run"), [0])
    trial = create_trial(d + "/ ")
    assert isinstance(trial, LocalTrial)
    assert trial.name == "my_run"
    assert create_trial(d, name="other", parallel=True, check=False, cache=True).name == "other"
    with pytest.raises(TypeError, match="bogus"):
        create_trial(d, bogus=1)
    assert trial == create_trial(d)
    assert "my_run" in repr(trial)


def test_tensor_names_by_step_mode_regex_and_collection(moded_dir):
    trial = create_trial(moded_dir)
    assert trial.tensor_names() == ["dense.weight", "eval_only", "loss"]
    assert trial.tensor_names(step=5) == ["eval_only", "loss"]
    assert trial.tensor_names(step=1, mode=modes.EVAL) == ["eval_only", "loss"]
    assert trial.tensor_names(mode=modes.EVAL) == ["eval_only", "loss"]
    assert trial.tensor_names(mode=modes.TRAIN) == ["dense.weight", "loss"]
    assert trial.tensor_names(regex="weight$") == ["dense.weight"]
    assert trial.tensor_names(regex=["^eval", ["^loss"]]) == ["eval_only", "loss"]
    assert trial.tensor_names(collection="weights") == ["dense.weight"]
    assert trial.tensor_names(collection=trial.collection("losses")) == ["loss"]
    with pytest.raises(ValueError, match="Only one"):
        trial.tensor_names(regex="x", collection="weights")
    # older names
    assert trial.tensors() == trial.tensor_names()
    assert trial.tensors_matching_regex("only") == ["eval_only"]
    assert trial.tensors_in_collection("losses") == ["loss"]
    assert trial.available_steps(modes.EVAL) == [0, 1]


def test_collections(moded_dir):
    trial = create_trial(moded_dir)
    assert sorted(trial.collections()) == ["losses", "weights"]
    assert trial.collection("weights").include_regex == ["weight"]
    # a name the file lacks: a new, empty collection (test_trial_collections.py)
    assert trial.collection("nope").tensor_names == set()


def test_mode_steps_of_tensors(moded_dir):
    trial = create_trial(moded_dir)
    loss = trial.tensor("loss")
    assert loss.steps() == [0, 1, 2, 3, 4, 5, 6]
    assert loss.steps(mode=modes.TRAIN) == [0, 1, 2, 3, 4]
    assert loss.steps(mode=modes.EVAL) == [0, 1]
    assert trial.tensor("eval_only").steps() == [5]
    np.testing.assert_array_equal(loss.value(1, mode=modes.EVAL), tensor_value(5, "worker_0", "loss"))
    np.testing.assert_array_equal(loss.value(4, mode=modes.TRAIN), tensor_value(6, "worker_0", "loss"))
    assert loss.prev_steps(5, 2) == [4, 5]
    assert loss.prev_steps(3, mode=modes.TRAIN) == [0, 1, 2, 3]
    assert trial.mode(5) == modes.EVAL
    assert trial.mode_step(6) == 4
    assert trial.global_step(modes.TRAIN, 4) == 6
    assert trial.global_step(modes.GLOBAL, 9) == 9
    assert trial.global_step(modes.PREDICT, 0) is None
    assert trial.mode(99) is None


def test_unknown_tensor_worker_and_step(moded_dir):
    trial = create_trial(moded_dir)
    assert not trial.has_tensor("nope")
    with pytest.raises(TensorUnavailable):
        trial.tensor("nope")
    with pytest.raises(InvalidWorker, match="worker_9"):
        trial.tensor("loss").value(0, worker="worker_9")
    with pytest.raises(TensorUnavailableForStep) as info:
        trial.tensor("eval_only").value(4)
    assert info.value.step == 4
    with pytest.raises(TensorUnavailableForStep):
        trial.tensor("eval_only").workers(4)


def test_saved_and_computed_reductions(moded_dir):
    storage = RecordingStorage()
    trial = create_trial(moded_dir, storage=storage)
    w = trial.tensor("dense.weight")
    value = tensor_value(2, "worker_0", "dense.weight")
    assert w.has_reductions(2)
    assert not w.has_reductions(6)
    # saved records are served as saved (shape [1] numpy scalars from the writer)
    assert w.reduction_value(2, "mean").tolist() == [np.float32(value.mean())]
    assert w.reduction_value(2, "max", abs=True).tolist() == [np.float32(np.abs(value).max())]
    assert set(w.reduction_values(2)) == {("mean", False), ("max", True)}
    # others are computed from the full value, once
    storage.reset()
    l2 = w.reduction_value(2, "l2_norm")
    assert l2.item() == pytest.approx(float(np.linalg.norm(value.ravel())), rel=1e-6)
    assert w.reduction_value(2, "l2").item() == l2.item()
    assert len(storage.views) == 1  # the value was decoded once, from its mapped event file
    assert storage.reads == []
    with pytest.raises(ValueError, match="unknown reduction"):
        w.reduction_value(2, "median")


def test_local_value_is_decoded_from_its_mapped_event_file_as_an_array_of_its_own(moded_dir):
    storage = RecordingStorage()
    trial = create_trial(moded_dir, storage=storage)
    storage.reset()
    v = trial.tensor("loss").value(3)
    assert storage.reads == []
    assert storage.views == [f"{moded_dir}/events/000000000003/000000000003_worker_0.tfevents"]
    again = trial.tensor("loss").value(3)
    np.testing.assert_array_equal(again, v)
    assert again is not v
    assert v.flags.writeable
    assert again.flags.writeable
    np.testing.assert_array_equal(v, tensor_value(3, "worker_0", "loss"))


def test_values_and_prefetch_of_a_local_trial_map_each_event_file_once(moded_dir):
    storage = RecordingStorage()
    trial = create_trial(moded_dir, storage=storage)
    storage.reset()
    values = trial.tensor("loss").values(mode=modes.TRAIN)
    assert sorted(values) == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(values[4], tensor_value(6, "worker_0", "loss"))
    assert storage.reads == []
    assert len(set(storage.views)) == len(storage.views) == 5
    storage.reset()
    assert trial.prefetch(["dense.weight"], [0, 1, 2, 3]) == 12  # 4 values + 8 saved reductions
    assert sorted(p.rsplit("/", 1)[1] for p in set(storage.views)) == [
        f"00000000000{s}_worker_0.tfevents" for s in range(4)
    ]
    assert storage.reads == []


# The remote reader (S3's: ranged reads, a value cache), run here on local files. A one-byte
# read-ahead budget selects it without widening any read beyond its records.
REMOTE_READER = {"readahead_bytes": 1}


def test_value_is_one_ranged_read_of_exactly_its_record_and_is_cached(moded_dir):
    storage = RecordingStorage()
    trial = create_trial(moded_dir, storage=storage, **REMOTE_READER)
    with open(os.path.join(moded_dir, "index/000000000/000000000003_worker_0.json")) as f:
        entry = [e for e in json.load(f)["tensor_payload"] if e["tensorname"] == "loss"][0]
    storage.reset()
    v = trial.tensor("loss").value(3)
    assert storage.reads == [
        (
            f"{moded_dir}/events/000000000003/000000000003_worker_0.tfevents",
            entry["start_idx"],
            entry["start_idx"] + entry["length"],
        )
    ]
    again = trial.tensor("loss").value(3)
    assert len(storage.reads) == 1
    np.testing.assert_array_equal(again, v)
    assert again is not v  # each call hands out its own copy of the cached value (writable)


def test_values_are_writable_and_changing_them_leaves_the_cache_intact(moded_dir):
    # GIVEN a trial that has read (and cached) a value, its saved and computed reductions
    trial = create_trial(moded_dir)
    w = trial.tensor("dense.weight")
    expected = tensor_value(2, "worker_0", "dense.weight")
    saved_mean = w.reduction_value(2, "mean").copy()
    computed_l2 = w.reduction_value(2, "l2").copy()
    # WHEN user code modifies every returned array in place
    for got in (
        w.value(2),
        w.values()[2],
        w.values(mode=modes.TRAIN)[2],
        w.reduction_value(2, "mean"),
        w.reduction_value(2, "l2"),
        *w.reduction_values(2).values(),
    ):
        assert got.flags.writeable
        got[...] = -1
    # THEN later reads still return the saved data
    np.testing.assert_array_equal(w.value(2), expected)
    np.testing.assert_array_equal(trial.tensor("dense.weight").values()[2], expected)
    np.testing.assert_array_equal(w.reduction_value(2, "mean"), saved_mean)
    np.testing.assert_array_equal(w.reduction_value(2, "l2"), computed_l2)
    assert w.reduction_values(2)[("mean", False)].tolist() == saved_mean.tolist()


def test_cached_values_are_read_only():
    cache = ValueCache(max_bytes=1000)
    cache.put("a", np.zeros(4))
    with pytest.raises(ValueError, match="read-only"):
        cache.get("a")[0] = 1


def test_values_and_prefetch_read_concurrently_in_one_batch(moded_dir):
    storage = RecordingStorage()
    trial = create_trial(moded_dir, storage=storage, **REMOTE_READER)
    storage.reset()
    values = trial.tensor("loss").values(mode=modes.TRAIN)
    assert sorted(values) == [0, 1, 2, 3, 4]
    assert storage.batches == [5]
    np.testing.assert_array_equal(values[4], tensor_value(6, "worker_0", "loss"))

    storage.reset()
    assert trial.prefetch(["dense.weight"], [0, 1, 2, 3]) == 12  # 4 values + 8 saved reductions
    # one batch; the records of each step's event file come in one ranged read within that file
    assert storage.batches == [4]
    assert sorted(p.rsplit("/", 1)[1] for p, _, _ in storage.reads) == [
        f"00000000000{s}_worker_0.tfevents" for s in range(4)
    ]
    for path, start, end in storage.reads:
        assert 0 <= start < end <= os.path.getsize(path)
    storage.reset()
    trial.tensor("dense.weight").value(1)
    trial.tensor("dense.weight").reduction_value(1, "mean")
    assert storage.reads == []


def test_shape_only_tensor(tmp_path):
    d = str(tmp_path / "run")
    write_collections(d)
    tw = TrialWriter(d)
    sw = tw.step_writer(0)
    sw.add_shape("big", (1000, 3))
    sw.add_tensor("small", np.ones(2, np.int8))
    sw.add_shape("small", (2,))
    tw.write_step(sw)
    tw.write_end_marker()
    trial = create_trial(d)
    assert trial.tensor_names() == ["big", "small"]
    assert trial.tensor("big").shape(0) == (1000, 3)
    with pytest.raises(TensorUnavailableForStep) as info:
        trial.tensor("big").value(0)
    assert not info.value.has_reductions
    small = trial.tensor("small").value(0)
    assert small.dtype == np.int8
    assert trial.tensor("small").shape(0) == (2,)


def test_multi_worker_default_worker_is_the_first_that_saved_it(tmp_path):
    d = str(tmp_path / "run")
    for w in ("worker_0", "worker_1"):
        write_collections(d, num_workers=2, worker=w)
    write_step(d, 0, worker="worker_1", names=("loss", "only_on_1"))
    write_step(d, 0, worker="worker_0", names=("loss",))
    trial = create_trial(d)
    assert trial.workers() == ["worker_0", "worker_1"]
    np.testing.assert_array_equal(trial.tensor("loss").value(0), tensor_value(0, "worker_0", "loss"))
    only = trial.tensor("only_on_1")
    np.testing.assert_array_equal(only.value(0), tensor_value(0, "worker_1", "only_on_1"))
    assert trial.tensor("only_on_1").workers(0) == ["worker_1"]
    # as smdebug: a worker without this tensor at this step is an InvalidWorker for it
    with pytest.raises(InvalidWorker, match="worker_0.*only_on_1.*step 0"):
        trial.tensor("only_on_1").value(0, worker="worker_0")


def test_value_cache_is_bounded_by_bytes():
    cache = ValueCache(max_bytes=100)
    for i in range(10):
        cache.put(i, np.zeros(4, np.float64))  # 32 bytes each
    assert len(cache) == 3
    assert cache.get(9) is not None
    assert cache.get(0) is None
    cache.put("huge", np.zeros(100, np.float64))
    assert "huge" not in cache


def test_smdebug_step_num_keyword_is_accepted(moded_dir):
    t = create_trial(moded_dir).tensor("dense.weight")
    np.testing.assert_array_equal(t.value(step_num=2), t.value(2))
    mean = t.reduction_value(2, "mean").tolist()
    assert t.reduction_value(step_num=2, reduction_name="mean").tolist() == mean
    assert t.shape(step_num=1) == (2, 3)
    assert t.workers(step_num=1) == ["worker_0"]
    with pytest.raises(TypeError, match="both"):
        t.value(2, step_num=2)
    np.testing.assert_array_equal(t.value(step_num=4, mode=modes.TRAIN), t.value(6))
    with pytest.raises(TypeError, match="missing required argument: 'step'"):
        t.value()
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['stepnum'\\]"):
        t.value(stepnum=2)
    with pytest.raises(TypeError, match="'reduction_name'"):
        t.reduction_value(2)
    with pytest.raises(TypeError, match="both"):
        t.reduction_value(2, "mean", step_num=2)


def test_scanned_and_parsed_records_read_alike_as_arrays_of_their_own(tmp_path):
    """Numeric records are scanned in place, strings and empty arrays parsed: each an array of its own."""
    values = {
        "f32": np.arange(12, dtype=np.float32).reshape(3, 4),
        "f16": np.arange(5, dtype=np.float16),
        "bool": np.array([True, False]),
        "scalar": np.zeros((), np.float64),
        "empty": np.zeros((0, 2), np.int32),
        "text": np.array(["a", "bcd"]),
    }
    tw = TrialWriter(str(tmp_path), worker="worker_0")
    tw.write_collections({}, num_workers=1)
    for step in (0, 1):
        sw = tw.step_writer(step)
        for name, value in values.items():
            sw.add_tensor(name, value)
        tw.write_step(sw)
    tw.write_end_marker()
    trial = create_trial(str(tmp_path))
    for name, expected in values.items():
        tensor = trial.tensor(name)
        for got in (tensor.value(0), tensor.value(1), *tensor.values().values()):
            assert got.dtype == expected.dtype
            assert got.shape == expected.shape
            np.testing.assert_array_equal(got, expected)
            assert got.flags.writeable
            got[...] = expected.flat[-1] if expected.size else got  # writing changes no later read
        np.testing.assert_array_equal(tensor.value(1), expected)

"""Read-ahead: a missed value brings its event-file neighbours in one read (S3 default; opt-in locally)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from trial_builder import RecordingStorage, make_trial_dir, tensor_value

from tornasole.exceptions import IndexReaderException
from tornasole.trials import create_trial
from tornasole.trials.caches import BlockCache, ValueCache
from tornasole.trials.readahead import readahead_span
from tornasole.trials.step_index import RecordLocation

NAMES = ("a", "b", "c", "d")


def _loc(start: int, length: int, path: str = "f") -> RecordLocation:
    return RecordLocation(path, start, length, f"t{start}", 0, "worker_0", "i")


def test_span_grows_over_contiguous_records_within_budget():
    recs = [_loc(0, 10), _loc(10, 10), _loc(20, 10), _loc(30, 10), _loc(0, 99, path="other")]

    def span(loc, neighbors, budget):
        return readahead_span(loc.event_path, loc.start, loc.start + loc.length, neighbors, budget)

    assert span(recs[1], recs, budget=30) == (10, 40)  # forward first
    assert span(recs[3], recs, budget=30) == (10, 40)
    assert span(recs[1], recs, budget=1000) == (0, 40)
    assert span(recs[1], recs, budget=10) == (10, 20)
    # a record not indexed any more (a repeated tag's earlier copy) leaves a gap that is read over
    assert span(recs[0], [recs[0], recs[2]], budget=100) == (0, 30)


def test_block_cache_is_bounded():
    cache = BlockCache(max_bytes=10)
    cache.put("f", 0, b"12345")
    cache.put("g", 0, b"123456")
    assert cache.find("f", 0, 2) is None
    assert bytes(cache.find("g", 1, 3)) == b"23"
    cache.put("h", 0, b"x" * 11)
    assert cache.find("h", 0, 1) is None


def test_local_trials_do_not_read_ahead(tmp_path):
    d = make_trial_dir(str(tmp_path / "run"), [0, 1], names=NAMES)
    storage = RecordingStorage()
    trial = create_trial(d, storage=storage)
    storage.reset()
    for name in NAMES:
        trial.tensor(name).value(0)
    # values come from the mapped event file of step 0, with no ranged read at all
    assert storage.reads == []
    assert set(storage.views) == {os.path.join(d, "events", "000000000000", "000000000000_worker_0.tfevents")}


def test_readahead_serves_a_step_from_one_read(tmp_path):
    d = make_trial_dir(str(tmp_path / "run"), [0, 1, 2], names=NAMES, reductions=True)
    storage = RecordingStorage()
    trial = create_trial(d, storage=storage, readahead_bytes=1 << 20)
    storage.reset()
    for name in NAMES:  # tensor-major, as users loop
        t = trial.tensor(name)
        for step in (0, 1, 2):
            np.testing.assert_array_equal(t.value(step), tensor_value(step, "worker_0", name))
            assert t.reduction_value(step, "mean").shape == (1,)
    assert len(storage.reads) == 3  # one per event file
    for path, start, end in storage.reads:
        assert start == 0
        assert end == os.path.getsize(path)  # never more than the event file


def test_readahead_window_is_bounded_by_the_budget(tmp_path):
    d = make_trial_dir(str(tmp_path / "run"), [0], names=NAMES)
    storage = RecordingStorage()
    budget = 300
    trial = create_trial(d, storage=storage, readahead_bytes=budget)
    storage.reset()
    for name in NAMES:
        trial.tensor(name).value(0)
    assert 1 < len(storage.reads) < len(NAMES)
    assert all(end - start <= budget for _, start, end in storage.reads)


def test_readahead_over_a_truncated_file_keeps_the_intact_records(tmp_path):
    d = make_trial_dir(str(tmp_path / "run"), [0], names=NAMES)
    path = os.path.join(d, "events/000000000000/000000000000_worker_0.tfevents")
    os.truncate(path, os.path.getsize(path) - 5)
    trial = create_trial(d, readahead_bytes=1 << 20)
    np.testing.assert_array_equal(trial.tensor("a").value(0), tensor_value(0, "worker_0", "a"))
    with pytest.raises(IndexReaderException, match="past the end") as info:
        trial.tensor("d").value(0)
    assert info.value.tensor_name == "d"


def test_bulk_fetches_widen_over_the_event_file_and_fill_the_block_cache(tmp_path):
    d = make_trial_dir(str(tmp_path / "run"), [0, 1, 2], names=NAMES)
    storage = RecordingStorage()
    trial = create_trial(d, storage=storage, readahead_bytes=1 << 20)
    storage.reset()
    first = trial.tensor("a").values()
    assert storage.batches == [3]  # one widened span per event file
    rest = {name: trial.tensor(name).values() for name in NAMES[1:]}
    assert storage.batches == [3]  # the other tensors came from the block cache
    assert storage.reads
    assert all(start == 0 for _, start, _ in storage.reads)
    np.testing.assert_array_equal(first[2], tensor_value(2, "worker_0", "a"))
    np.testing.assert_array_equal(rest["d"][1], tensor_value(1, "worker_0", "d"))


def test_a_missed_value_brings_the_event_files_of_the_tensors_next_steps_in_one_batch(tmp_path):
    """A loop over a tensor's steps (or a step's tensors) makes one round of concurrent reads."""
    steps = list(range(6))
    d = make_trial_dir(str(tmp_path / "run"), steps, names=NAMES, reductions=True)
    storage = RecordingStorage()
    trial = create_trial(d, storage=storage, readahead_bytes=1 << 20)
    storage.reset()
    np.testing.assert_array_equal(trial.tensor("b").value(0), tensor_value(0, "worker_0", "b"))
    assert storage.batches == [len(steps)]  # every event file, in one read_many
    assert all(start == 0 for _, start, _ in storage.reads)  # each widened over its whole file
    for name in NAMES:
        t = trial.tensor(name)
        for step in steps:
            np.testing.assert_array_equal(t.value(step), tensor_value(step, "worker_0", name))
            assert t.reduction_value(step, "mean").shape == (1,)
    assert storage.batches == [len(steps)]  # nothing read again
    assert len(storage.reads) == len(steps)


def test_read_ahead_along_steps_stops_after_the_readers_file_budget(tmp_path):
    steps = list(range(5))
    d = make_trial_dir(str(tmp_path / "run"), steps, names=NAMES)
    storage = RecordingStorage()
    trial = create_trial(d, storage=storage, readahead_bytes=1 << 20)
    trial._reader.ahead_files = 2  # the budget: the missed step and two after it
    storage.reset()
    t = trial.tensor("a")
    for step in steps:
        np.testing.assert_array_equal(t.value(step), tensor_value(step, "worker_0", "a"))
    assert storage.batches == [3, 2]


def test_read_ahead_sees_steps_that_arrive_later(tmp_path):
    """The read-ahead keeps a sorted copy of the tensor's steps, renewed when steps are added."""
    d = make_trial_dir(str(tmp_path / "run"), [0, 1], names=NAMES)
    storage = RecordingStorage()
    trial = create_trial(d, storage=storage, readahead_bytes=1 << 20)
    t = trial.tensor("a")
    np.testing.assert_array_equal(t.value(0), tensor_value(0, "worker_0", "a"))
    before = t._steps_sorted
    assert before == [0, 1]
    rec = trial._table.record(1)
    t._table.add_step(2, "worker_0", rec.mode, 2, dict(rec.workers["worker_0"]))  # a step that arrived
    t._reader.cache = type(t._reader.cache)(t._reader.cache.max_bytes)  # forget the values read so far
    t._reader.blocks = type(t._reader.blocks)(t._reader.blocks.max_bytes)
    t.value(1)
    assert t._steps_sorted == [0, 1, 2]


def test_a_shared_value_cache_serves_the_next_trial(tmp_path):
    """The evaluator builds a trial per step: values decoded by one are found by the next (no read)."""
    d = make_trial_dir(str(tmp_path / "run"), [0, 1], names=NAMES)
    storage = RecordingStorage()
    shared = ValueCache()

    def event_reads(value_cache):
        trial = create_trial(d, storage=storage, readahead_bytes=1 << 20, value_cache=value_cache)
        storage.reset()
        for step in (0, 1):
            np.testing.assert_array_equal(trial.tensor("a").value(step), tensor_value(step, "worker_0", "a"))
        return [r for r in storage.reads if "/events/" in r[0]]

    assert event_reads(shared)  # the first trial reads
    assert event_reads(shared) == []  # the next one finds them decoded
    assert event_reads(None)  # a trial of its own reads again


def test_a_value_cache_can_count_each_entrys_overhead():
    """A long-lived cache of scalars: their 4 bytes of data are not what they cost in memory."""
    cache = ValueCache(max_bytes=3 * 516, entry_overhead=512)
    for key in range(4):
        cache.put(key, np.zeros(1, dtype=np.float32))
    assert len(cache) == 3
    assert cache.get(0) is None  # the oldest went

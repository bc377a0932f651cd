"""Live trials: new steps, multi-worker completeness, range_steps, waiting, the end marker."""

from __future__ import annotations

import threading
import time

import pytest
from trial_builder import (
    RecordingStorage,
    make_trial_dir,
    write_collections,
    write_end,
    write_step,
)

from tornasole import modes
from tornasole.analysis.utils import no_refresh, refresh
from tornasole.exceptions import (
    ConfigurationError,
    MissingCollectionFiles,
    NoMoreData,
    StepNotYetAvailable,
    StepUnavailable,
)
from tornasole.trials import StepState, create_trial


def test_live_trial_picks_up_new_steps_and_then_the_end(tmp_path):
    d = str(tmp_path / "run")
    write_collections(d)
    write_step(d, 0)
    trial = create_trial(d)
    assert trial.steps() == [0]
    assert not trial.loaded_all_steps

    write_step(d, 1)
    write_step(d, 2)
    assert trial.steps() == [0, 1, 2]
    assert trial.tensor("loss").steps() == [0, 1, 2]
    assert not trial.training_ended()

    write_end(d)
    assert trial.steps() == [0, 1, 2]
    assert trial.loaded_all_steps
    assert trial.is_complete


def test_finished_local_trial_opens_without_sleeping(tmp_path, monkeypatch):
    # GIVEN a finished run and no end-delay setting (the default)
    d = make_trial_dir(str(tmp_path / "run"), range(20))
    monkeypatch.delenv("TORNASOLE_TRAINING_END_DELAY_REFRESH", raising=False)

    def no_sleep(seconds):
        raise AssertionError(f"opening a finished trial slept {seconds} s")

    monkeypatch.setattr(time, "sleep", no_sleep)
    storage = RecordingStorage()
    # WHEN it is opened and queried
    trial = create_trial(d, storage=storage)
    # THEN every step is there and final after a single listing of the index
    assert trial.steps() == list(range(20))
    assert trial.loaded_all_steps
    assert len(storage.index_lists()) == 1


def test_live_trial_polls_with_backoff_up_to_the_interval(tmp_path, monkeypatch):
    d = str(tmp_path / "run")
    make_trial_dir(d, [0], end=False)
    trial = create_trial(d, poll_interval=0.04)
    waits = []

    def record_sleep(seconds):
        waits.append(seconds)
        if len(waits) == 6:
            write_step(d, 1)

    monkeypatch.setattr(time, "sleep", record_sleep)
    trial.wait_for_steps([1])
    assert waits == [0.005, 0.01, 0.02, 0.04, 0.04, 0.04]


def test_steps_written_between_end_marker_and_final_refresh_are_loaded(tmp_path, monkeypatch):
    # GIVEN the end marker lands before the last index file is visible, and the user asked to wait for that
    monkeypatch.setenv("TORNASOLE_TRAINING_END_DELAY_REFRESH", "0.5")
    d = str(tmp_path / "run")
    make_trial_dir(d, [0], end=False)
    trial = create_trial(d)
    write_end(d)
    real_sleep = time.sleep

    def sleep_then_land(seconds):
        write_step(d, 1)  # arrives during the end-delay sleep
        real_sleep(0)

    monkeypatch.setattr("tornasole.trials.trial.time.sleep", sleep_then_land)
    # THEN the refresh after the delay still sees it
    assert trial.steps() == [0, 1]
    assert trial.loaded_all_steps


def test_multi_worker_step_completes_when_every_worker_wrote_it(tmp_path):
    d = str(tmp_path / "run")
    write_collections(d, num_workers=2, worker="worker_0")
    write_collections(d, num_workers=2, worker="worker_1")
    write_step(d, 0, worker="worker_0")
    write_step(d, 0, worker="worker_1")
    write_step(d, 1, worker="worker_0")
    trial = create_trial(d)

    assert trial.num_workers == 2
    assert trial.steps() == [0]
    assert trial.steps(show_incomplete_steps=True) == [0, 1]
    assert trial.has_passed_step(1) == StepState.NOT_YET_AVAILABLE
    assert trial.tensor("loss").steps() == [0]
    assert trial.tensor("loss").steps(show_incomplete_steps=True) == [0, 1]

    write_step(d, 1, worker="worker_1")
    assert trial.steps() == [0, 1]
    assert trial.has_passed_step(1) == StepState.AVAILABLE


def test_step_skipped_by_one_worker_completes_once_a_later_step_does(tmp_path):
    d = str(tmp_path / "run")
    for w in ("worker_0", "worker_1"):
        write_collections(d, num_workers=2, worker=w)
    write_step(d, 2, worker="worker_0")
    trial = create_trial(d)
    assert trial.steps() == []
    write_step(d, 3, worker="worker_0")
    write_step(d, 3, worker="worker_1")  # worker_1 never writes step 2
    assert trial.steps() == [2, 3]
    assert trial.tensor("loss").workers(2) == ["worker_0"]


def test_incomplete_steps_become_complete_when_training_ends(tmp_path):
    d = str(tmp_path / "run")
    for w in ("worker_0", "worker_1"):
        write_collections(d, num_workers=2, worker=w)
    write_step(d, 0, worker="worker_0")
    trial = create_trial(d)
    assert trial.steps() == []
    write_end(d)
    assert trial.steps() == [0]


def test_late_worker_index_of_an_incomplete_step_is_still_found(tmp_path):
    # The listing token never moves past an incomplete step, so its late worker is picked up.
    d = str(tmp_path / "run")
    for w in ("worker_0", "worker_1"):
        write_collections(d, num_workers=2, worker=w)
    for s in (0, 1, 2):
        write_step(d, s, worker="worker_0")
    write_step(d, 0, worker="worker_1")
    trial = create_trial(d)
    assert trial.last_complete_step == 0
    write_step(d, 1, worker="worker_1")
    assert trial.steps() == [0, 1]
    assert trial.tensor("loss").workers(1) == ["worker_0", "worker_1"]


def test_range_steps_loads_only_steps_in_range(tmp_path):
    d = make_trial_dir(str(tmp_path / "run"), range(10))
    storage = RecordingStorage()
    trial = create_trial(d, range_steps=(3, 7), storage=storage)
    assert trial.steps() == [3, 4, 5, 6]
    assert trial.tensor("loss").steps() == [3, 4, 5, 6]
    # the listing started at step 3, not at the beginning of the trial
    first = storage.index_lists()[0]
    assert first[1] is not None
    assert "000000000003" in first[1]
    assert all("000000000000_" not in k for k in first[2])
    with pytest.raises(NoMoreData):
        trial.tensor("loss").value(8)


def test_range_steps_is_validated():
    with pytest.raises(ValueError, match="range_steps"):
        create_trial("/nonexistent", range_steps=(5, 2))


def test_refresh_lists_only_after_the_last_key_seen(tmp_path):
    d = str(tmp_path / "run")
    make_trial_dir(d, range(5), end=False)
    storage = RecordingStorage()
    trial = create_trial(d, storage=storage)
    assert trial.steps() == list(range(5))
    token = trial.last_index_token
    assert token.endswith("index/000000000/000000000004_worker_0.json")

    storage.reset()
    write_step(d, 5)
    write_step(d, 6)
    assert trial.steps() == list(range(7))
    calls = storage.index_lists()
    assert calls, "refresh must list"
    # the first refresh listed after the last key seen, and returned only the new keys
    assert calls[0][1] == token
    returned = {k for c in calls for k in c[2]}
    assert sorted(returned) == [
        f"{d}/index/000000000/000000000005_worker_0.json",
        f"{d}/index/000000000/000000000006_worker_0.json",
    ]
    assert all(k > start_after for _, start_after, keys in calls for k in keys)
    # only the new index files were read, nothing already loaded
    assert sorted(p for p, _, _ in storage.reads) == sorted(returned)


def test_no_refresh_hides_new_steps_until_the_block_ends(tmp_path):
    d = str(tmp_path / "run")
    make_trial_dir(d, [0], end=False)
    trial = create_trial(d)
    write_step(d, 1)
    with no_refresh(trial):
        assert trial.steps() == [0]
        with refresh([trial]):
            assert trial.steps() == [0, 1]
        write_step(d, 2)
        assert trial.steps() == [0, 1]
    assert trial.dynamic_refresh
    assert trial.steps() == [0, 1, 2]


def test_wait_for_steps_returns_when_the_step_lands(tmp_path):
    d = str(tmp_path / "run")
    make_trial_dir(d, [0], end=False)
    trial = create_trial(d, poll_interval=0.02)
    timer = threading.Timer(0.1, write_step, args=(d, 1))
    timer.start()
    try:
        trial.wait_for_steps([0, 1], timeout=10)
    finally:
        timer.join()
    assert trial.has_passed_step(1) == StepState.AVAILABLE


def test_wait_for_steps_raises_for_skipped_steps_and_after_the_end(tmp_path):
    d = str(tmp_path / "run")
    make_trial_dir(d, [0, 5], end=False)
    trial = create_trial(d, poll_interval=0.01)
    with pytest.raises(StepUnavailable):
        trial.wait_for_steps([3])
    with pytest.raises(StepNotYetAvailable):
        trial.wait_for_steps([6], timeout=0.05)
    write_end(d)
    with pytest.raises(NoMoreData):
        trial.wait_for_steps([6])
    with pytest.raises(StepUnavailable):
        trial.wait_for_steps([2])


def test_has_passed_step_states(tmp_path):
    d = str(tmp_path / "run")
    write_collections(d)
    write_step(d, 0, mode=modes.TRAIN, mode_step=0)
    write_step(d, 4, mode=modes.TRAIN, mode_step=4)
    trial = create_trial(d)
    assert trial.has_passed_step(0) == StepState.AVAILABLE
    assert trial.has_passed_step(2) == StepState.UNAVAILABLE  # skipped: step 4 is complete
    assert trial.has_passed_step(9) == StepState.NOT_YET_AVAILABLE
    assert trial.has_passed_step(4, mode=modes.TRAIN) == StepState.AVAILABLE
    assert trial.has_passed_step(1, mode=modes.EVAL) == StepState.NOT_YET_AVAILABLE
    write_end(d)
    assert trial.has_passed_step(9) == StepState.UNAVAILABLE


def test_value_errors_distinguish_not_yet_skipped_and_no_more_data(tmp_path):
    d = str(tmp_path / "run")
    make_trial_dir(d, [0, 2], end=False)
    trial = create_trial(d)
    loss = trial.tensor("loss")
    with pytest.raises(StepUnavailable):
        loss.value(1)
    with pytest.raises(StepNotYetAvailable):
        loss.value(3)
    write_step(d, 3)
    assert loss.value(3).shape == (2, 3)  # a live value() picks the new step up
    write_end(d)
    with pytest.raises(NoMoreData):
        loss.value(4)


def test_missing_collections_with_end_marker_raises(tmp_path):
    d = str(tmp_path / "run")
    write_step(d, 0)
    write_end(d)
    with pytest.raises(MissingCollectionFiles, match=str(tmp_path)):
        create_trial(d, collections_timeout=0)


def test_without_collections_a_trial_waits_then_goes_on_and_loads_them_later(tmp_path):
    d = str(tmp_path / "run")
    write_step(d, 0)
    start = time.monotonic()
    trial = create_trial(d, collections_timeout=0.1, poll_interval=0.02)
    assert time.monotonic() - start >= 0.1
    assert trial.num_workers == 0
    assert trial.steps() == []  # completeness unknown without num_workers
    assert trial.steps(show_incomplete_steps=True) == [0]
    write_collections(d)
    assert trial.steps() == [0]
    assert sorted(trial.collections()) == ["losses", "weights"]
    assert trial.num_workers == 1


def test_trial_without_listing_reads_only_the_index_files_it_is_given(tmp_path):
    d = make_trial_dir(str(tmp_path / "run"), range(4), workers=2)
    storage = RecordingStorage()
    trial = create_trial(d, listing=False, storage=storage)
    assert trial.steps() == []
    loaded = trial.load_index_files(
        ["index/000000000/000000000002_worker_0.json", f"{d}/index/000000000/000000000002_worker_1.json"]
    )
    assert loaded == [2]
    assert trial.steps() == [2]
    assert trial.num_workers == 2
    assert trial.tensor("loss").value(2, worker="worker_1").shape == (2, 3)
    assert trial.tensor_names() == ["dense.weight", "loss"]
    assert storage.lists == []
    with pytest.raises(StepNotYetAvailable):
        trial.wait_for_steps([3])
    # a file that is not there is skipped, not a bad step
    assert trial.load_index_files(["index/000000000/000000000009_worker_0.json"]) == []
    assert trial.bad_steps == {}
    with pytest.raises(ValueError, match="not an index file"):
        trial.load_index_files(["events/000000000002/000000000002_worker_0.tfevents"])


def test_trial_without_listing_without_collections_treats_loaded_steps_as_complete(tmp_path):
    d = str(tmp_path / "run")
    write_step(d, 7)
    trial = create_trial(d, listing=False)
    assert trial.load_index_files(["index/000000000/000000000007_worker_0.json"]) == [7]
    assert trial.steps() == [7]
    assert trial.num_workers == 0


def test_a_worker_that_stops_writing_does_not_keep_the_listing_growing(tmp_path, monkeypatch):
    monkeypatch.setattr("tornasole.trials.loading.INCOMPLETE_STEP_WINDOW", 4)
    d = str(tmp_path / "run")
    for w in ("worker_0", "worker_1"):
        write_collections(d, num_workers=2, worker=w)
    for s in range(6):
        write_step(d, s, worker="worker_0")  # worker_1 never writes
    storage = RecordingStorage()
    trial = create_trial(d, storage=storage)
    # six steps wait (> 4): the older half is settled and the token moves past it
    assert trial.steps() == [0, 1, 2]
    assert trial.last_index_token.endswith("000000000002_worker_0.json")


def test_bad_end_delay_setting_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("TORNASOLE_TRAINING_END_DELAY_REFRESH", "soon")
    with pytest.raises(ConfigurationError, match="TORNASOLE_TRAINING_END_DELAY_REFRESH='soon'"):
        create_trial(make_trial_dir(str(tmp_path / "run"), [0]))


def test_value_of_a_late_worker_is_found_by_a_refresh(tmp_path):
    d = str(tmp_path / "run")
    for w in ("worker_0", "worker_1"):
        write_collections(d, num_workers=2, worker=w)
    write_step(d, 0, worker="worker_0")
    write_step(d, 1, worker="worker_1")
    trial = create_trial(d)
    with pytest.raises(StepNotYetAvailable):
        trial.tensor("loss").value(1, worker="worker_0")
    write_step(d, 1, worker="worker_0")
    assert trial.tensor("loss").value(1, worker="worker_0").shape == (2, 3)

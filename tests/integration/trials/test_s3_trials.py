"""Trials on S3 (moto server): the fixture trees read as locally; live refresh lists only what is new."""

from __future__ import annotations

import numpy as np
import pytest
from s3_trial_helpers import RecordingS3Storage, check_modes, check_value, expected, upload_tree

from tornasole.format.writer import TrialWriter
from tornasole.modes import GLOBAL
from tornasole.trials import S3Trial, create_trial

TREES = ["pt_hook_single", "pt_dist_2workers", "core_writer_2workers"]


@pytest.mark.parametrize("tree", TREES)
def test_fixture_tree_on_s3_reads_like_the_ground_truth(fixtures_dir, s3_bucket, tree):
    url = upload_tree(fixtures_dir / tree, s3_bucket, f"jobs/{tree}")
    values, records = expected(fixtures_dir, tree)
    trial = create_trial(url)

    assert isinstance(trial, S3Trial)
    assert trial.name == tree
    assert trial.steps() == sorted({r["step"] for r in records})
    assert trial.workers() == sorted({r["worker"] for r in records})
    assert trial.loaded_all_steps
    # bulk-fetch everything concurrently, then compare every value
    trial.prefetch(trial.tensor_names(), trial.steps())
    for key, want in values.items():
        check_value(trial, key, want)
    check_modes(trial, records)


def test_s3_and_local_trials_agree(fixtures_dir, s3_bucket):
    url = upload_tree(fixtures_dir / "pt_hook_single", s3_bucket, "run")
    s3_trial = create_trial(url)
    local = create_trial(str(fixtures_dir / "pt_hook_single"))
    assert s3_trial.tensor_names() == local.tensor_names()
    assert s3_trial.modes() == local.modes()
    assert sorted(s3_trial.collections()) == sorted(local.collections())
    t = "gradient/Net_fc1.weight"
    for step in local.tensor(t).steps():
        np.testing.assert_array_equal(s3_trial.tensor(t).value(step), local.tensor(t).value(step))


def test_finished_s3_trial_lists_once_more_after_the_end_marker_without_sleeping(s3_bucket, monkeypatch):
    url = f"s3://{s3_bucket}/finished"
    TrialWriter(url).write_collections({}, num_workers=1)
    for step in range(3):
        _write_step(url, step)
    TrialWriter(url).write_end_marker()
    monkeypatch.delenv("TORNASOLE_TRAINING_END_DELAY_REFRESH", raising=False)
    sleeps = []
    monkeypatch.setattr("tornasole.trials.trial.time.sleep", sleeps.append)
    storage = RecordingS3Storage()
    trial = create_trial(url, storage=storage)
    assert trial.steps() == [0, 1, 2]
    assert trial.loaded_all_steps
    assert sleeps == []
    lists = storage.index_lists()
    assert len(lists) == 2  # the opening listing, then one after the end marker: nothing new
    assert lists[1][2] == []


def test_s3_trial_built_with_smdebugs_arguments(fixtures_dir, s3_bucket):
    url = upload_tree(fixtures_dir / "pt_hook_single", s3_bucket, "outputs/run")
    trial = S3Trial(name="outputs/run", bucket_name=s3_bucket, prefix_name="outputs/run")
    assert (trial.path, trial.bucket_name, trial.prefix_name) == (url, s3_bucket, "outputs/run/")
    positional = S3Trial("run", s3_bucket, "outputs/run/", (0, 10**9))
    assert positional.path == url
    local = create_trial(str(fixtures_dir / "pt_hook_single"))
    assert trial.tensor_names() == local.tensor_names()
    for name in trial.tensor_names():
        assert trial.tensor(name).steps() == local.tensor(name).steps()
        for step in trial.tensor(name).steps():
            np.testing.assert_array_equal(trial.tensor(name).value(step), local.tensor(name).value(step))
    with pytest.raises(ValueError, match="bucket_name"):
        S3Trial("run", "a/b", "x")


def _write_step(url: str, step: int) -> None:
    tw = TrialWriter(url)
    sw = tw.step_writer(step, mode=GLOBAL)
    sw.add_tensor("loss", np.float32([step]))
    tw.write_step(sw)


def test_live_s3_trial_lists_only_after_the_last_key(s3_bucket):
    url = f"s3://{s3_bucket}/live"
    TrialWriter(url).write_collections({}, num_workers=1)
    for step in range(3):
        _write_step(url, step)
    storage = RecordingS3Storage()
    trial = create_trial(url, storage=storage)
    assert trial.steps() == [0, 1, 2]
    token = trial.last_index_token
    assert token == f"{url}/index/000000000/000000000002_worker_0.json"

    storage.lists.clear()
    _write_step(url, 3)
    assert trial.steps() == [0, 1, 2, 3]
    assert trial.tensor("loss").value(3).tolist() == [3.0]
    calls = storage.index_lists()
    assert calls[0][1] == token
    assert {k for c in calls for k in c[2]} == {f"{url}/index/000000000/000000000003_worker_0.json"}

    TrialWriter(url).write_end_marker()
    assert trial.is_complete
    storage.lists.clear()
    assert trial.steps() == [0, 1, 2, 3]
    assert storage.lists == []  # after the end nothing is listed again


def test_s3_trial_without_listing(fixtures_dir, s3_bucket):
    url = upload_tree(fixtures_dir / "pt_dist_2workers", s3_bucket, "dist")
    storage = RecordingS3Storage()
    trial = create_trial(url, listing=False, storage=storage)
    keys = [f"index/000000000/000000000004_worker_{w}.json" for w in (0, 1)]
    assert trial.load_index_files(keys) == [4]
    assert trial.steps() == [4]
    assert trial.num_workers == 2
    values, _ = expected(fixtures_dir, "pt_dist_2workers")
    for key, want in values.items():
        if key.split("|")[1] == "4":
            check_value(trial, key, want)
    assert storage.lists == []


def test_s3_range_steps_starts_the_listing_at_the_range(fixtures_dir, s3_bucket):
    url = upload_tree(fixtures_dir / "pt_hook_single", s3_bucket, "ranged")
    storage = RecordingS3Storage()
    trial = create_trial(url, range_steps=(5, 30), storage=storage)
    assert trial.steps() == [5, 10, 15, 20, 22, 24, 25]
    first = storage.index_lists()[0]
    assert first[1] == f"{url}/index/000000000/000000000005"
    assert all("000000000000_" not in k for k in first[2])


def test_s3_value_loop_reads_each_event_file_once(fixtures_dir, s3_bucket):
    # GIVEN a user loop over tensors then steps on an S3 trial (read-ahead is on by default)
    url = upload_tree(fixtures_dir / "pt_hook_single", s3_bucket, "loop")
    values, _ = expected(fixtures_dir, "pt_hook_single")
    storage = RecordingS3Storage()
    trial = create_trial(url, storage=storage)
    for key, want in values.items():
        check_value(trial, key, want)
    # THEN each event file was fetched with one ranged GET, not one GET per value
    event_reads = [r for r in storage.reads if "/events/" in r[0]]
    assert len({p for p, _, _ in event_reads}) == len(event_reads) == len(trial.steps())
    assert len(values) > 10 * len(event_reads)

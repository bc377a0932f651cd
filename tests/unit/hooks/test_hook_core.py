"""The framework-agnostic hook: save configs, reductions, collections, scalars, close, disabling."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import numpy as np
import pytest

from tornasole import Hook, ReductionConfig, SaveConfig, SaveConfigMode, modes
from tornasole.exceptions import ConfigurationError
from tornasole.trials import create_trial


def _run(hook: Hook, steps: int, mode=modes.TRAIN) -> None:
    hook.set_mode(mode)
    for i in range(steps):
        hook.save_tensor("w", np.full((2, 2), i, dtype=np.float32))
        hook.next_step()


def _collections(out: Path) -> dict:
    return json.loads((out / "collections/000000000/worker_0_collections.json").read_text())


def test_save_interval_start_end_and_explicit_steps(tmp_path: Path):
    sc = SaveConfig(save_interval=3, start_step=2, end_step=10, save_steps=[1])
    with Hook(str(tmp_path), save_config=sc) as hook:
        _run(hook, 12)
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [1, 3, 6, 9]
    np.testing.assert_array_equal(trial.tensor("w").value(6), np.full((2, 2), 6, dtype=np.float32))


def test_per_mode_save_configs_and_mode_steps(tmp_path: Path):
    sc = SaveConfig(
        mode_save_configs={
            modes.TRAIN: SaveConfigMode(save_interval=4),
            modes.EVAL: SaveConfigMode(save_interval=2),
        }
    )
    with Hook(str(tmp_path), save_config=sc) as hook:
        _run(hook, 8, modes.TRAIN)  # global 0..7
        _run(hook, 3, modes.EVAL)  # global 8..10
    trial = create_trial(str(tmp_path))
    assert trial.steps(mode=modes.TRAIN) == [0, 4]
    assert trial.steps(mode=modes.EVAL) == [0, 2]
    assert trial.global_step(modes.EVAL, 2) == 10
    assert trial.mode(8) == modes.EVAL
    doc = _collections(tmp_path)["collections"]["default"]["save_config"]
    assert doc["PREDICT"] is None
    assert doc["EVAL"]["save_interval"] == 2


def test_reductions_shapes_and_raw_tensor_choice(tmp_path: Path):
    rc = ReductionConfig(
        reductions=["max", "mean"], abs_reductions=["min"], norms=["l1"], abs_norms=["l2"], save_shape=True
    )
    value = np.array([[-3.0, 1.0], [2.0, -0.5]], dtype=np.float32)
    with Hook(str(tmp_path), save_config=SaveConfig(save_interval=1), reduction_config=rc) as hook:
        hook.save_tensor("t", value)
    trial = create_trial(str(tmp_path))
    t = trial.tensor("t")
    assert t.reduction_value(0, "max") == pytest.approx(2.0)
    assert t.reduction_value(0, "mean") == pytest.approx(value.mean())
    assert t.reduction_value(0, "min", abs=True) == pytest.approx(0.5)
    assert t.reduction_value(0, "l1") == pytest.approx(6.5)
    assert t.reduction_value(0, "l2", abs=True) == pytest.approx(np.linalg.norm(value.ravel()))
    index = json.loads((tmp_path / "index/000000000/000000000000_worker_0.json").read_text())
    tags = [e["tensorname"] for e in index["tensor_payload"]]
    # FORMAT.md 2.4 order: plain reductions, norms, abs reductions, abs norms; no raw tensor
    assert tags == [
        "smdebug/reductions/max/t",
        "smdebug/reductions/mean/t",
        "smdebug/reductions/l1/t",
        "smdebug/reductions/abs_min/t",
        "smdebug/reductions/abs_l2/t",
    ]
    assert index["shape_payload"] == [{"tensorname": "t", "originalname": "t", "shape": [2, 2]}]


def test_include_regex_save_all_and_unincluded_collections(tmp_path: Path):
    out1, out2 = tmp_path / "regex", tmp_path / "all"
    with Hook(str(out1), save_config=SaveConfig(save_interval=1), include_regex=["^keep"]) as hook:
        other = hook.get_collection("other")
        other.include("^other")  # defined but not in include_collections: not saved (smdebug semantics)
        hook.save_tensor("keep_me", np.ones(2), collections_to_write="misc")
        hook._save_named("keep_regex", np.ones(3))
        hook._save_named("other_x", np.ones(3))
    names = create_trial(str(out1)).tensor_names()
    assert names == ["keep_me", "keep_regex"]
    with Hook(str(out2), save_config=SaveConfig(save_interval=1), save_all=True) as hook:
        hook._save_named("anything", np.ones(1))
    assert create_trial(str(out2)).tensor_names() == ["anything"]
    assert _collections(out2)["collections"]["all"]["include_regex"] == [".*"]


def test_scalars_are_written_at_their_own_step_and_mode(tmp_path: Path):
    # smdebug caches scalars into the next saved step's writer, with that step's mode (FORMAT.md 7.4)
    with Hook(str(tmp_path), save_config=SaveConfig(save_interval=100)) as hook:
        hook.get_collection("scalars").save_config = SaveConfig(save_interval=1)
        hook.set_mode(modes.TRAIN)
        for i in range(3):
            hook.save_scalar("lr", 0.1 * (i + 1))
            hook.next_step()
        hook.set_mode(modes.EVAL)
        hook.save_scalar("acc", 0.75)
    trial = create_trial(str(tmp_path))
    lr = trial.tensor("scalar/lr")
    assert lr.steps() == [0, 1, 2]
    assert [float(lr.value(s)[0]) for s in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    assert trial.tensor("scalar/acc").steps(mode=modes.EVAL) == [0]
    assert trial.mode(3) == modes.EVAL
    assert lr.value(1).dtype == np.float64
    # the collections file is written once, after the first saved step: names matched so far (FORMAT.md 4)
    assert trial.collection("scalars").tensor_names == {"scalar/lr"}


def test_scalars_follow_the_hook_save_config_by_default(tmp_path: Path):
    with Hook(str(tmp_path), save_config=SaveConfig(save_interval=2)) as hook:
        for i in range(5):
            hook.save_scalar("lr", float(i))
            hook.next_step()
    lr = create_trial(str(tmp_path)).tensor("scalar/lr")
    assert lr.steps() == [0, 2, 4]
    assert float(lr.value(4)[0]) == 4.0


def test_collections_written_once_after_first_saved_step_and_end_marker_last(tmp_path, recording_storage):
    storage = recording_storage(str(tmp_path))
    with Hook(str(tmp_path), save_config=SaveConfig(save_interval=2), storage=storage) as hook:
        _run(hook, 5)
    rel = [p[len(str(tmp_path)) + 1 :] for p in storage.writes]
    assert rel == [
        "events/000000000000/000000000000_worker_0.tfevents",
        "index/000000000/000000000000_worker_0.json",
        "collections/000000000/worker_0_collections.json",
        "events/000000000002/000000000002_worker_0.tfevents",
        "index/000000000/000000000002_worker_0.json",
        "events/000000000004/000000000004_worker_0.tfevents",
        "index/000000000/000000000004_worker_0.json",
        "training_job_end.ts",
    ]
    doc = _collections(tmp_path)
    assert doc["_meta"] == {"num_workers": 1}
    assert doc["collections"]["default"]["tensor_names"] == ["w"]
    assert (tmp_path / "training_job_end.ts").stat().st_size == 0


def test_close_without_saved_steps_writes_collections_then_end_marker(tmp_path: Path):
    hook = Hook(str(tmp_path))
    hook.close()
    hook.close()  # idempotent
    assert list(_collections(tmp_path)["collections"]) == [
        "all",
        "default",
        "weights",
        "biases",
        "gradients",
        "losses",
    ]
    assert (tmp_path / "training_job_end.ts").exists()


def test_no_end_marker_on_sagemaker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TRAINING_JOB_NAME", "job-1")
    resource_config = tmp_path.parent / f"{tmp_path.name}-resourceconfig.json"
    resource_config.write_text('{"current_host": "algo-1", "hosts": ["algo-1"]}')
    monkeypatch.setattr("tornasole.hooks.lifecycle.RESOURCE_CONFIG_FILE", str(resource_config))
    with Hook(str(tmp_path), save_config=SaveConfig(save_interval=1)) as hook:
        _run(hook, 1)
    assert (tmp_path / "index/000000000/000000000000_worker_0.json").exists()
    assert not (tmp_path / "training_job_end.ts").exists()


@pytest.mark.parametrize("how", ["argument", "env"])
def test_disabled_hook_writes_nothing_and_starts_no_thread(tmp_path: Path, monkeypatch, how):
    before = threading.active_count()
    if how == "env":
        monkeypatch.setenv("TORNASOLE_HOOK_DISABLED", "1")
        hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=1))
    else:
        hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=1), enabled=False)
    _run(hook, 3)
    hook.save_scalar("x", 1.0)
    hook.close()
    assert not hook.enabled
    assert list(tmp_path.iterdir()) == []
    assert threading.active_count() == before


def test_write_failure_is_reported_once_and_never_raised(tmp_path, recording_storage, caplog):
    storage = recording_storage(str(tmp_path), fail_if=lambda p: "/events/" in p)
    caplog.set_level(logging.DEBUG, logger="tornasole.hooks")
    with Hook(
        str(tmp_path), save_config=SaveConfig(save_interval=1), storage=storage, retry_base_delay=0.001
    ) as hook:
        _run(hook, 3)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "step 0" in errors[0].getMessage()
    # an event that could not be written never gets an index announcing it
    assert not (tmp_path / "index").exists()
    assert storage.attempts.count(str(tmp_path / "events/000000000001/000000000001_worker_0.tfevents")) == 5
    assert (tmp_path / "training_job_end.ts").exists()


def test_bad_arguments_name_the_value(tmp_path: Path):
    with pytest.raises(ConfigurationError, match="'some'"):
        Hook(str(tmp_path), include_workers="some")
    with pytest.raises(ConfigurationError, match="out_dir"):
        Hook(None)
    with Hook(str(tmp_path)) as hook, pytest.raises(ConfigurationError, match=r"\(3,\)"):
        hook.save_scalar("v", np.ones(3))

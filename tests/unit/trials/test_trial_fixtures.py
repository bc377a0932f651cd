"""Every fixture tree written by smdebug 1.0.34 reads back through create_trial exactly."""

from __future__ import annotations

import numpy as np
import pytest
from trial_expectations import check_all_values, check_modes, expected

from tornasole import modes
from tornasole.exceptions import TensorUnavailableForStep
from tornasole.trials import LocalTrial, create_trial

TREES = ["pt_hook_single", "pt_dist_2workers", "core_writer_2workers"]


@pytest.mark.parametrize("tree", TREES)
def test_every_expected_value_reads_back(fixtures_dir, tree):
    values, records = expected(fixtures_dir, tree)
    trial = create_trial(str(fixtures_dir / tree))

    assert isinstance(trial, LocalTrial)
    assert trial.name == tree
    assert check_all_values(trial, values) == len(values) > 0
    check_modes(trial, records)
    steps = sorted({r["step"] for r in records})
    assert trial.steps() == steps
    assert trial.workers() == sorted({r["worker"] for r in records})


@pytest.mark.parametrize("tree", TREES)
def test_steps_per_mode_match_the_index_meta(fixtures_dir, tree):
    _, records = expected(fixtures_dir, tree)
    trial = create_trial(str(fixtures_dir / tree))
    by_mode: dict = {}
    for r in records:
        by_mode.setdefault(modes.ModeKeys.from_name(r["index_mode"]), set()).add(r["index_mode_step"])
    for mode, mode_steps in by_mode.items():
        if mode != modes.GLOBAL:
            assert trial.steps(mode=mode) == sorted(mode_steps)
    assert trial.modes() == sorted((m for m in by_mode if m != modes.GLOBAL), key=lambda m: m.value)


def test_pt_hook_single_steps_and_mode_mapping(fixtures_dir):
    # FORMAT.md 5
    trial = create_trial(str(fixtures_dir / "pt_hook_single"))
    assert trial.steps() == [0, 5, 10, 15, 20, 22, 24, 25, 30, 35, 40, 46, 48]
    assert trial.steps(mode=modes.TRAIN) == [0, 5, 10, 15, 20, 25, 30, 35]
    assert trial.steps(mode=modes.EVAL) == [0, 2, 4, 6, 8]
    assert trial.mode(20) == modes.EVAL
    assert trial.mode_step(25) == 20
    assert trial.global_step(modes.EVAL, 2) == 22
    assert trial.global_step(modes.TRAIN, 20) == 25
    assert trial.modes() == [modes.TRAIN, modes.EVAL]
    assert trial.num_workers == 1
    assert trial.loaded_all_steps
    assert trial.training_ended()


def test_shape_payload_entry_does_not_hide_a_saved_value(fixtures_dir):
    # GIVEN gradient/Net_fc1.weight has both a tensor_payload and a shape_payload entry
    trial = create_trial(str(fixtures_dir / "pt_hook_single"))
    t = trial.tensor("gradient/Net_fc1.weight")
    # THEN the raw value is readable (smdebug raises TensorUnavailableForStep here)
    v = t.value(0)
    assert v.shape == (6, 8)
    assert v.dtype == np.float32
    assert t.shape(0) == (6, 8)
    assert t.has_reductions(0)
    # a saved reduction record is served as saved; a missing one is computed from the value
    assert t.reduction_value(0, "mean", abs=True).item() == pytest.approx(float(np.abs(v).mean()), rel=1e-6)
    assert t.reduction_value(0, "variance").item() == pytest.approx(float(np.var(v)), rel=1e-5)


def test_repeated_tag_in_one_index_keeps_the_last_record(fixtures_dir):
    values, _ = expected(fixtures_dir, "pt_hook_single")
    trial = create_trial(str(fixtures_dir / "pt_hook_single"))
    # five scalar/lr records at step 5 (FORMAT.md 7.4); the npz holds the last one
    assert trial.tensor("scalar/lr").value(5).tolist() == values["worker_0|5|scalar/lr"].tolist()


def test_tensorboard_subtree_is_ignored_and_values_read(fixtures_dir):
    trial = create_trial(str(fixtures_dir / "pt_hook_tensorboard"))
    names = trial.tensor_names()
    assert names
    assert all(not n.startswith("tensorboard") for n in names)
    for name in names:
        t = trial.tensor(name)
        for step in t.steps():
            try:
                value = t.value(step)
            except TensorUnavailableForStep:
                assert t.has_reductions(step) or t.shape(step) is not None
                continue
            assert t.shape(step) == value.shape


def test_multi_worker_value_per_worker_and_default_worker(fixtures_dir):
    trial = create_trial(str(fixtures_dir / "pt_dist_2workers"))
    assert trial.num_workers == 2
    name = "gradient/Sequential_0.weight"
    step = trial.tensor(name).steps()[0]
    t = trial.tensor(name)
    assert t.workers(step) == ["worker_0", "worker_1"]
    # worker=None is the first worker by name
    assert np.array_equal(t.value(step), t.value(step, worker="worker_0"))
    assert not np.array_equal(t.value(step, worker="worker_0"), t.value(step, worker="worker_1"))

"""Skipping idle rounds: the XGBoost hook saves exactly what it saves when it asks on every round."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xgboost as xgb

from tornasole.core.save_config import SaveConfig, SaveConfigMode
from tornasole.trials import create_trial
from tornasole.xgboost import Hook

SETTINGS = [
    SaveConfigMode(save_interval=1),
    SaveConfigMode(save_interval=100),
    SaveConfigMode(save_interval=7, start_step=3),
    SaveConfigMode(save_interval=5, start_step=12, end_step=41),
    SaveConfigMode(save_interval=10, end_step=30, save_steps=[0, 4, 33, 57]),
    SaveConfigMode(save_interval=10**9, start_step=1),
    SaveConfigMode(save_interval=3, start_step=50, end_step=50),
    SaveConfigMode.union(SaveConfigMode(save_interval=6), SaveConfigMode(save_interval=4, start_step=9)),
    SaveConfigMode.union(
        SaveConfigMode(save_interval=9, end_step=40), SaveConfigMode(save_interval=25, save_steps=[41])
    ),
]


@pytest.mark.parametrize("settings", SETTINGS, ids=repr)
def test_next_saved_step_is_the_first_step_should_save_step_accepts(settings):
    horizon = 200
    saved = [s for s in range(horizon) if settings.should_save_step(s)]
    for step in range(horizon - 100):
        expected = next((s for s in saved if s >= step), math.inf)
        got = settings.next_saved_step(step)
        assert got == expected or (expected == math.inf and got >= horizon), (step, got, expected)


def _saved(tmp_path, name, save_config, rounds=60, skip=True, xgb_model=None, intervals=None):
    rng = np.random.default_rng(0)
    x = rng.random((200, 4))
    d = xgb.DMatrix(x, label=x @ rng.random(4))
    hook = Hook(
        str(tmp_path / name),
        save_config=save_config,
        include_collections=["metrics", "feature_importance"],
    )
    for collection, interval in (intervals or {}).items():
        hook.get_collection(collection).save_config = SaveConfig(save_interval=interval)
    if not skip:
        hook._next_saved_round = lambda first: 0  # ask the save manager on every round
    xgb.train(
        {"max_depth": 2},
        d,
        rounds,
        evals=[(d, "train")],
        callbacks=[hook],
        verbose_eval=False,
        xgb_model=xgb_model,
    )
    hook.close()
    trial = create_trial(str(tmp_path / name))
    return {n: trial.tensor(n).steps() for n in trial.tensor_names()}


CONFIGS = {
    "every 7 from 3": SaveConfig(save_interval=7, start_step=3),
    "range and steps": SaveConfig(save_interval=5, start_step=12, end_step=41, save_steps=[1, 2, 44]),
    "every 100": SaveConfig(save_interval=100),
}


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_same_steps_saved_as_when_asking_every_round(tmp_path, config):
    skipped = _saved(tmp_path, "skip", CONFIGS[config])
    asked = _saved(tmp_path, "ask", CONFIGS[config], skip=False)
    assert skipped == asked
    assert skipped["train-rmse"]


def test_collections_with_their_own_intervals_and_continued_training(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.random((200, 4))
    first = xgb.train({"max_depth": 2}, xgb.DMatrix(x, label=x @ rng.random(4)), 5)
    steps = {}
    for name, skip in (("skip", True), ("ask", False)):
        steps[name] = _saved(
            tmp_path,
            name,
            SaveConfig(save_interval=9),
            rounds=40,
            skip=skip,
            xgb_model=first,
            intervals={"feature_importance": 15},
        )
    assert steps["skip"] == steps["ask"]
    assert steps["skip"]["train-rmse"] == [0, 9, 18, 27, 36]  # xgboost counts the new rounds from 0
    assert steps["skip"]["feature_importance/weight/f0"] == [0, 15, 30]


class _SaveScalarAt(xgb.callback.TrainingCallback):
    """A user callback saving a scalar at some rounds (the ``scalars`` collection saves every 4)."""

    def __init__(self, hook, rounds):
        super().__init__()
        self.hook, self.rounds = hook, rounds

    def after_iteration(self, model, epoch, evals_log):
        if epoch in self.rounds:
            self.hook.save_scalar("seen", float(epoch))
        return False


def _scalars_run(out, skip):
    rng = np.random.default_rng(2)
    x = rng.random((200, 4))
    d = xgb.DMatrix(x, label=x @ rng.random(4))
    hook = Hook(str(out), save_config=SaveConfig(save_interval=50), include_collections=["metrics"])
    hook.get_collection("scalars").save_config = SaveConfig(save_interval=4)
    if not skip:
        hook._next_saved_round = lambda first: 0
    callbacks = [hook, _SaveScalarAt(hook, {8, 13, 20, 24})]
    xgb.train({"max_depth": 2}, d, 30, evals=[(d, "train")], callbacks=callbacks, verbose_eval=False)
    hook.close()
    trial = create_trial(str(out))
    return {n: trial.tensor(n).steps() for n in trial.tensor_names()}


def test_a_collection_included_mid_training_saves_as_when_asking_every_round(tmp_path):
    skipped, asked = _scalars_run(tmp_path / "skip", True), _scalars_run(tmp_path / "ask", False)
    assert skipped == asked
    # saved at round 8 (the scalars collection saves every 4 from then on), not at 13; at 20 and 24
    # the hook has already closed the round it saved when the later callback runs, in both modes
    assert skipped == {"train-rmse": [0], "scalar/seen": [8]}


def test_a_second_training_with_the_same_hook_saves_its_rounds_again(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.random((200, 4))
    d = xgb.DMatrix(x, label=x @ rng.random(4))
    hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=10), include_collections=["metrics"])
    written = []
    write_round = hook._write_round
    hook._write_round = lambda model, epoch, *rest: (written.append(epoch), write_round(model, epoch, *rest))
    for rounds in (15, 12):
        xgb.train({"max_depth": 2}, d, rounds, evals=[(d, "train")], callbacks=[hook], verbose_eval=False)
    hook.close()
    assert written == [0, 10, 0, 10]
    assert hook.step == 11  # the second training's last round

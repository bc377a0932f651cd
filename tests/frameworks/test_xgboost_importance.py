"""Feature importances: ``feature_importances`` equals ``Booster.get_score`` bit for bit, mid-training
too; the hook's saved shares equal it bit for bit at its first save, and after it (walking only the new
trees, ``running_importance``) exactly in ``weight`` and within float32 rounding in the sums."""

from __future__ import annotations

import numpy as np
import pytest
import xgboost as xgb

from tornasole.core.save_config import SaveConfig
from tornasole.trials import create_trial
from tornasole.xgboost import Hook, importance
from tornasole.xgboost.importance import IMPORTANCE_TYPES, feature_importances

CASES = {
    "regression": {"objective": "reg:squarederror"},
    "binary": {"objective": "binary:logistic"},
    "multiclass": {"objective": "multi:softprob", "num_class": 3},
    "dart": {"booster": "dart", "rate_drop": 0.3, "skip_drop": 0.0},
    "forest": {"num_parallel_tree": 3, "subsample": 0.7, "colsample_bynode": 0.6},
    "exact": {"tree_method": "exact", "max_depth": 6},
}


def _dmatrix(params, seed=0, n=500, names=None):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 7))
    y = x @ rng.random(7)
    if params.get("objective") == "binary:logistic":
        y = (y > np.median(y)).astype(float)
    elif "num_class" in params:
        y = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3])).astype(float)
    return xgb.DMatrix(x, label=y, feature_names=names)


class _GetScoreEvery(xgb.callback.TrainingCallback):
    """Compares ``feature_importances`` with ``get_score`` after every ``every`` rounds."""

    def __init__(self, every=3):
        super().__init__()
        self.every, self.checked, self.rounds = every, [], []

    def after_iteration(self, model, epoch, evals_log):
        if epoch % self.every == 0:
            _assert_equals_get_score(model)
            self.checked.append(epoch)
            self.rounds.append(model.num_boosted_rounds())
        return False


def _assert_equals_get_score(booster):
    got = feature_importances(booster)
    assert list(got) == list(IMPORTANCE_TYPES)
    for kind in IMPORTANCE_TYPES:
        expected = booster.get_score(importance_type=kind)
        assert list(got[kind].items()) == list(expected.items()), kind  # same features, order, bits


@pytest.mark.parametrize("case", sorted(CASES))
def test_equal_get_score_at_every_checked_round(case):
    params = {"max_depth": 4, "eta": 0.3, **CASES[case]}
    check = _GetScoreEvery()
    d = _dmatrix(params)
    booster = xgb.train(params, d, 30, evals=[(d, "train")], callbacks=[check], verbose_eval=False)
    assert check.checked == list(range(0, 30, 3))
    _assert_equals_get_score(booster)


@pytest.mark.parametrize("strategy", ["multi_output_tree", "one_output_per_tree"])
def test_equal_get_score_for_several_targets(strategy):
    rng = np.random.default_rng(4)
    x = rng.random((300, 5))
    d = xgb.DMatrix(x, label=np.stack([x @ rng.random(5), x @ rng.random(5)], axis=1))
    check = _GetScoreEvery(every=2)
    params = {"tree_method": "hist", "multi_strategy": strategy, "max_depth": 3}
    booster = xgb.train(params, d, 10, callbacks=[check])
    assert check.checked == [0, 2, 4, 6, 8]
    _assert_equals_get_score(booster)


NAMES = ["age", "höhe", "size", "w", "x", "y", "z"]  # a non-ASCII name comes back as get_score's


def continued_with_early_stopping(callback):
    """15 rounds trained, then continued with ``callback`` until a validation set stops improving."""
    params = {"max_depth": 3, "objective": "binary:logistic"}
    d = _dmatrix(params, names=NAMES)
    val = _dmatrix(params, seed=1, names=NAMES)
    first = xgb.train(params, d, 15)
    booster = xgb.train(
        params,
        d,
        200,
        evals=[(val, "validation")],
        xgb_model=first,
        early_stopping_rounds=3,
        callbacks=[callback],
        verbose_eval=False,
    )
    assert booster.num_boosted_rounds() < 215  # stopped early
    return booster


def test_equal_get_score_with_feature_names_continued_training_and_early_stopping():
    check = _GetScoreEvery(every=2)
    booster = continued_with_early_stopping(check)
    assert check.rounds[0] == 16  # the first check saw the 15 loaded rounds and one new
    _assert_equals_get_score(booster)
    assert "höhe" in feature_importances(booster)["weight"]


def test_without_the_c_api_get_score_gives_the_same(monkeypatch):
    params = {"max_depth": 4, "objective": "multi:softprob", "num_class": 3}
    booster = xgb.train(params, _dmatrix(params), 8)
    direct = feature_importances(booster)
    monkeypatch.setattr(importance, "_C_API", [(None, None, None)])
    assert feature_importances(booster) == direct
    _assert_equals_get_score(booster)


def test_feature_by_feature_division_equals_the_vectorized_one():
    booster = xgb.train({"max_depth": 4}, _dmatrix({}), 12)
    names, weight = importance.feature_scores(booster, "weight")
    gain = importance.feature_scores(booster, "total_gain")
    cover = importance.feature_scores(booster, "total_cover")
    by_name = importance._by_name(dict(zip(names, weight.tolist())), *gain, *cover)
    assert by_name == feature_importances(booster)


def test_saved_importances_are_get_score_normalized_at_every_saved_round(tmp_path):
    params = {"max_depth": 3, "objective": "multi:softprob", "num_class": 3}
    d = _dmatrix(params)
    expected = {}

    class Record(xgb.callback.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            if epoch % 4 == 0:
                expected[epoch] = {k: model.get_score(importance_type=k) for k in IMPORTANCE_TYPES}
            return False

    hook = Hook(
        str(tmp_path), save_config=SaveConfig(save_interval=4), include_collections=["feature_importance"]
    )
    xgb.train(params, d, 13, callbacks=[hook, Record()])
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0, 4, 8, 12] == sorted(expected)
    for step, by_kind in expected.items():
        for kind, scores in by_kind.items():
            total = float(sum(scores.values()))
            for feature, score in scores.items():
                saved = trial.tensor(f"feature_importance/{kind}/{feature}").value(step)
                assert saved.shape == (1,)
                assert saved.dtype == np.float64
                if step == 0 or kind == "weight":  # a whole walk / a split count: exact
                    assert saved.item() == score / total, (step, kind, feature)
                else:  # the new trees' sums added to the old ones: float32 rounding apart
                    assert saved.item() == pytest.approx(score / total, rel=2e-6), (step, kind, feature)

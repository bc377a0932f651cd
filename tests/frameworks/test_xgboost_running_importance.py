"""RunningImportance: importances that walk only the trees grown since the last save.

Checked against ``Booster.get_score`` during training: the same features in the same order, the
split counts exact and the sums within float32 rounding. The walks are recorded, to show that a save
after the first walks exactly its new trees and never names a tree past the model's last.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import xgboost as xgb

from tests.frameworks.test_xgboost_importance import CASES, _dmatrix, continued_with_early_stopping
from tornasole.xgboost import running_importance
from tornasole.xgboost.importance import IMPORTANCE_TYPES
from tornasole.xgboost.running_importance import RunningImportance


def _num_trees(model) -> int:
    booster = json.loads(model.save_config())["learner"]["gradient_booster"]
    return int(booster.get("gbtree", booster)["gbtree_model_param"]["num_trees"])


@pytest.fixture
def walks(monkeypatch):
    """The tree indices each chosen-trees walk named, with the model's tree count at that moment."""
    seen: list[tuple[list[int], int]] = []
    real = running_importance._direct_scores

    def recording(model, kind, args=None):
        if args is not None:
            seen.append((json.loads(args)["tree_idx"], _num_trees(model)))
        return real(model, kind, args)

    monkeypatch.setattr(running_importance, "_direct_scores", recording)
    return seen


def _assert_follows_get_score(table, model) -> None:
    features, scores = table
    for kind, row in zip(IMPORTANCE_TYPES, scores.tolist()):
        expected = model.get_score(importance_type=kind)
        assert list(features) == list(expected), kind  # the same features, in XGBoost's order
        if kind == "weight":
            assert row == list(expected.values())  # split counts: exact
        else:
            assert row == pytest.approx(list(expected.values()), rel=2e-6), kind


class _Check(xgb.callback.TrainingCallback):
    """Asks a RunningImportance for the table every ``every`` rounds and compares it with get_score."""

    def __init__(self, running, every=3):
        super().__init__()
        self.running, self.every, self.checked = running, every, []

    def after_iteration(self, model, epoch, evals_log):
        if epoch % self.every == 0:
            _assert_follows_get_score(self.running.table(model), model)
            self.checked.append((epoch, _num_trees(model)))
        return False


@pytest.mark.parametrize("case", sorted(CASES))
def test_follows_get_score_walking_only_new_trees(case, walks):
    params = {"max_depth": 4, "eta": 0.3, **CASES[case]}
    check = _Check(RunningImportance())
    d = _dmatrix(params)
    xgb.train(params, d, 40, evals=[(d, "train")], callbacks=[check], verbose_eval=False)
    assert [epoch for epoch, _ in check.checked] == list(range(0, 40, 3))
    counts = [trees for _, trees in check.checked]
    # after the first check (a whole walk), each check walked exactly the trees grown since the last
    expected = [list(range(a, b)) for a, b in zip(counts, counts[1:])]
    assert [indices for indices, _ in walks] == [i for i in expected for _ in range(3)]
    assert all(max(indices) < trees for indices, trees in walks)


@pytest.mark.parametrize(("strategy", "per_round"), [("one_output_per_tree", 2), ("multi_output_tree", 1)])
def test_several_targets_follow_get_score(strategy, per_round, walks):
    """Two targets: two trees a round (the tree count is read from the model at every save), or one
    tree with a leaf vector a round (one score per feature all the same)."""
    rng = np.random.default_rng(4)
    x = rng.random((300, 5))
    d = xgb.DMatrix(x, label=np.stack([x @ rng.random(5), x @ rng.random(5)], axis=1))
    check = _Check(RunningImportance(), every=2)
    params = {"tree_method": "hist", "multi_strategy": strategy, "max_depth": 3}
    xgb.train(params, d, 10, callbacks=[check])
    assert [trees for _, trees in check.checked] == [per_round * r for r in (1, 3, 5, 7, 9)]
    starts = [per_round * r for r in (1, 3, 5, 7)]
    assert [indices for indices, _ in walks][::3] == [list(range(a, a + 2 * per_round)) for a in starts]


def test_feature_names_continued_training_and_early_stopping(walks):
    check = _Check(RunningImportance(), every=2)
    booster = continued_with_early_stopping(check)
    assert check.checked[0][1] == 16  # the first check walked the 15 loaded trees and the new one
    assert walks
    assert walks[0][0][0] == 16  # the next walked from the 17th tree on
    assert "höhe" in check.running.table(booster)[0]


def _assert_exact(table, model) -> None:
    features, scores = table
    for kind, row in zip(IMPORTANCE_TYPES, scores.tolist()):
        assert list(zip(features, row)) == list(model.get_score(importance_type=kind).items()), kind


def test_another_model_is_walked_whole_first(walks):
    """Another booster (a new ``xgboost.train`` with the same hook), and back to the first one: each
    switch walks the whole model (get_score bit for bit), then follows it again."""
    running = RunningImportance()
    params = {"max_depth": 3}
    d = _dmatrix(params)
    first = xgb.train(params, d, 7, callbacks=[_Check(running)])
    assert len(walks) == 2 * 3  # rounds 3 and 6 walked their own trees
    second = xgb.train({**params, "eta": 0.9}, d, 4)
    _assert_exact(running.table(second), second)
    _assert_exact(running.table(first), first)
    assert len(walks) == 2 * 3
    first.update(d, 7)  # one more round of the first model: only its tree is walked
    _assert_follows_get_score(running.table(first), first)
    assert [indices for indices, _ in walks[-3:]] == [[7]] * 3


def test_a_model_refreshed_in_place_follows_get_score(walks):
    """``process_type=update`` with the refresh updater: each round re-commits one refreshed tree of
    the loaded model, so the model's tree count grows a tree a round and every tree walked is final."""
    params = {"max_depth": 3}
    base = xgb.train(params, _dmatrix(params), 8)
    check = _Check(RunningImportance(), every=2)
    refresh = {"process_type": "update", "updater": "refresh", "refresh_leaf": True, "max_depth": 3}
    with pytest.warns(UserWarning, match="updater"):
        xgb.train(refresh, _dmatrix(params, seed=5), 8, xgb_model=base, callbacks=[check])
    assert [trees for _, trees in check.checked] == [1, 3, 5, 7]
    assert all(max(indices) < trees for indices, trees in walks)


def test_a_feature_first_split_late_is_put_in_order():
    """Stumps on a target led by feature 0: the other features are first split in later rounds and
    take their place among the earlier ones in feature order, as get_score lists them."""
    rng = np.random.default_rng(2)
    x = rng.random((400, 7))
    d = xgb.DMatrix(x, label=x @ np.array([8.0, 0.3, 0.2, 4.0, 0.1, 2.0, 0.05]))
    running = RunningImportance()
    sizes = []

    class Sizes(_Check):
        def after_iteration(self, model, epoch, evals_log):
            super().after_iteration(model, epoch, evals_log)
            sizes.append(len(running.table(model)[0]))
            return False

    xgb.train({"max_depth": 1, "eta": 0.5}, d, 60, callbacks=[Sizes(running, every=1)])
    assert sizes[0] == 1
    assert sizes[-1] > 3  # features joined along the way
    assert sizes == sorted(sizes)


def test_a_linear_booster_fails_as_get_score_walks_do():
    params = {"booster": "gblinear"}
    booster = xgb.train(params, _dmatrix(params), 3)
    with pytest.raises(xgb.core.XGBoostError):
        RunningImportance().table(booster)


def test_a_failed_walk_of_new_trees_falls_back_to_whole_walks(monkeypatch, caplog):
    """Walking chosen trees only saves time: if XGBoost refuses it, the model is walked whole (the
    exact get_score values) from then on, and training goes on."""
    real = running_importance._direct_scores
    refused = []

    def refusing(model, kind, args=None):
        if args is not None:
            refused.append(kind)
            raise xgb.core.XGBoostError("refused")
        return real(model, kind, args)

    monkeypatch.setattr(running_importance, "_direct_scores", refusing)
    running, tables = RunningImportance(), []

    class Keep(xgb.callback.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            if epoch % 3 == 0:
                tables.append(running.table(model))
                _assert_exact(tables[-1], model)
            return False

    params = {"max_depth": 3}
    booster = xgb.train(params, _dmatrix(params), 10, callbacks=[Keep()])
    assert len(tables) == 4
    assert refused == ["weight"]  # tried once, then walked whole
    assert "walking the new trees failed" in caplog.text
    _assert_exact(running.table(booster), booster)


def test_a_model_loaded_in_place_with_fewer_trees_is_walked_whole():
    """The same booster object given a smaller model (``load_model``) between two saves, with more
    rounds but fewer trees than were summed: walked whole again, never the old sums."""
    params = {"max_depth": 3, "objective": "multi:softprob", "num_class": 3}
    d = _dmatrix(params)
    booster = xgb.train(params, d, 6)  # 18 trees
    running = RunningImportance()
    _assert_exact(running.table(booster), booster)
    small = xgb.train({"max_depth": 3}, _dmatrix({}, seed=3), 8)  # 8 rounds, 8 trees
    booster.load_model(small.save_raw())
    _assert_exact(running.table(booster), booster)

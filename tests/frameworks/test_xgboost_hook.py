"""XGBoost hook: smdebug's names and collections, and the XGBoost rules' verdicts on a real run."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xgboost as xgb

from tornasole.core.save_config import SaveConfig
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.create_xgboost_report import CreateXgboostReport
from tornasole.rules.builtin.feature_importance_overweight import FeatureImportanceOverweight
from tornasole.rules.builtin.tree_depth import TreeDepth
from tornasole.trials import create_trial

ALL = [
    "metrics",
    "losses",
    "feature_importance",
    "predictions",
    "labels",
    "trees",
    "average_shap",
    "full_shap",
    "hyperparameters",
]


def _data(n=300, weights=(4.0,), features=5, seed=0):
    """Features in [0, 1); the label is ``x @ weights`` (features past ``len(weights)`` are noise)."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, features))
    y = x[:, : len(weights)] @ np.asarray(weights) + rng.normal(0, 0.01, n)
    return xgb.DMatrix(x[: n * 2 // 3], label=y[: n * 2 // 3]), xgb.DMatrix(
        x[n * 2 // 3 :], label=y[n * 2 // 3 :]
    )


def _train(out, dtrain, dval, rounds=6, max_depth=2, collections=ALL, interval=1, params=None):
    from tornasole.xgboost import Hook

    params = {"max_depth": max_depth, "eta": 0.3, "min_child_weight": 0, "lambda": 0, **(params or {})}
    hook = Hook(
        str(out),
        save_config=SaveConfig(save_interval=interval),
        include_collections=collections,
        hyperparameters=params,
        train_data=dtrain,
        validation_data=dval,
    )
    booster = xgb.train(
        params,
        dtrain,
        rounds,
        evals=[(dtrain, "train"), (dval, "validation")],
        callbacks=[hook],
        verbose_eval=False,
    )
    hook.close()
    return booster


def test_names_values_and_collections_are_smdebugs(tmp_path):
    dtrain, dval = _data()
    booster = _train(tmp_path, dtrain, dval, rounds=4)
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0, 1, 2, 3]
    names = set(trial.tensor_names())
    assert {"train-rmse", "validation-rmse", "predictions", "labels", "hyperparameters/max_depth"} <= names
    for kind in ("weight", "gain", "cover", "total_gain", "total_cover"):
        assert f"feature_importance/{kind}/f0" in names
        total = sum(
            trial.tensor(n).value(3).item() for n in names if n.startswith(f"feature_importance/{kind}/")
        )
        assert total == pytest.approx(1.0)
    cols = {"Tree", "Node", "ID", "Feature", "Split", "Yes", "No", "Missing", "Gain", "Cover", "Category"}
    assert {n for n in names if n.startswith("trees/")} == {f"trees/{c}" for c in cols}
    # round 3's tree is the 4th tree of the model
    assert set(trial.tensor("trees/Tree").value(3).tolist()) == {3}
    assert trial.tensor("trees/ID").value(3)[0] == "3-0"
    np.testing.assert_allclose(trial.tensor("predictions").value(3), booster.predict(dval), rtol=1e-6)
    np.testing.assert_array_equal(trial.tensor("labels").value(0), dval.get_label())
    shap = booster.predict(dtrain, pred_contribs=True)
    np.testing.assert_allclose(trial.tensor("full_shap/f1").value(3), shap[:, 1], rtol=1e-6)
    assert trial.tensor("average_shap/f0").value(3).item() == pytest.approx(
        float(shap[:, 0].mean()), rel=1e-5
    )
    assert trial.tensor("validation-rmse").value(3).item() == pytest.approx(
        float(booster.eval(dval).split(":")[1]), rel=1e-5
    )
    assert "train-rmse" in trial.tensor_names(collection="losses")
    assert trial.tensor_names(collection="trees")


@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic"])
def test_feature_importances_equal_get_score_of_each_type(tmp_path, objective):
    from tornasole.xgboost.hook import IMPORTANCE_TYPES, feature_importances

    rng = np.random.default_rng(3)
    x = rng.random((400, 6))
    label = x @ rng.random(6)
    d = xgb.DMatrix(x, label=(label > np.median(label)).astype(float) if objective[0] == "b" else label)
    booster = xgb.train({"max_depth": 4, "objective": objective}, d, 25)
    got = feature_importances(booster)
    assert list(got) == list(IMPORTANCE_TYPES)
    for kind in IMPORTANCE_TYPES:
        expected = booster.get_score(importance_type=kind)
        assert list(got[kind].items()) == list(expected.items())  # same features, order and bits


def test_saved_importances_are_get_score_normalized(tmp_path):
    dtrain, dval = _data(weights=(4.0, 1.0, 0.5))
    booster = _train(tmp_path, dtrain, dval, rounds=5, max_depth=3, collections=["feature_importance"])
    trial = create_trial(str(tmp_path))
    for kind in ("gain", "cover"):
        scores = booster.get_score(importance_type=kind)
        total = float(sum(scores.values()))
        for feature, score in scores.items():
            saved = trial.tensor(f"feature_importance/{kind}/{feature}").value(4).item()
            assert saved == pytest.approx(score / total, rel=2e-6)  # new trees' sums added to the old


@pytest.mark.parametrize("booster", ["gblinear", "dart"])
def test_tree_collections_only_for_tree_boosters(tmp_path, booster):
    """A linear booster has no importances beyond its weights and no trees: neither is saved (its
    walk of the gains fails and the hook asks the booster type); dart boosts trees: both are."""
    dtrain, dval = _data(weights=(4.0, 1.0))
    _train(
        tmp_path,
        dtrain,
        dval,
        rounds=3,
        collections=["metrics", "feature_importance", "trees"],
        params={"booster": booster},
    )
    trial = create_trial(str(tmp_path))
    names = trial.tensor_names()
    assert trial.steps() == [0, 1, 2]
    assert {"train-rmse", "validation-rmse"} <= set(names)
    trees = booster == "dart"
    assert ("feature_importance/weight/f0" in names) is trees
    assert any(n.startswith("trees/") for n in names) is trees
    assert all(n.startswith(("train-", "validation-")) for n in names) is not trees


def test_default_saves_metrics_every_ten_rounds(tmp_path):
    from tornasole.xgboost import Hook

    dtrain, _ = _data(n=60)
    hook = Hook(str(tmp_path))
    xgb.train({"max_depth": 2}, dtrain, 12, evals=[(dtrain, "train")], callbacks=[hook], verbose_eval=False)
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0, 10]
    assert trial.tensor_names() == ["train-rmse"]


def test_tree_depth_verdicts_follow_max_depth(tmp_path):
    dtrain, dval = _data()
    _train(tmp_path, dtrain, dval, rounds=4, max_depth=3, collections=["trees"])
    trial = create_trial(str(tmp_path))
    observed = {
        s: int(math.floor(math.log2(trial.tensor("trees/Node").value(s).max() + 1))) for s in trial.steps()
    }
    assert set(observed.values()) == {3}  # the trees reach max_depth
    assert invoke_rule(TreeDepth(trial, depth="3")).fired == []
    fired = invoke_rule(TreeDepth(create_trial(str(tmp_path)), depth="5")).fired
    assert [o.step for o in fired] == [0, 1, 2, 3]


def test_feature_importance_overweight_verdicts(tmp_path):
    one = tmp_path / "one_feature"
    _train(one, *_data(weights=(4.0, 0.4)), rounds=3, max_depth=4, collections=["feature_importance"])
    spread = tmp_path / "five_features"
    _train(spread, *_data(weights=(1.0,) * 5), rounds=3, max_depth=4, collections=["feature_importance"])
    gain = ".*feature_importance/gain"

    def top_share(path, step):
        trial = create_trial(str(path))
        values = sorted(
            (trial.tensor(n).value(step).item() for n in trial.tensor_names(regex=gain)), reverse=True
        )
        return values[0] / sum(values), len(values)

    assert top_share(one, 2)[0] > 0.8
    assert top_share(one, 2)[1] > 1
    assert top_share(spread, 2)[0] < 0.8
    # one dominant feature: it holds nearly all the gain
    fired = invoke_rule(
        FeatureImportanceOverweight(create_trial(str(one)), threshold="0.8", nfeatures="1", tensor_regex=gain)
    ).fired
    assert [o.step for o in fired] == [0, 1, 2]
    # five equally informative features: the top one holds about a fifth
    calm = invoke_rule(
        FeatureImportanceOverweight(
            create_trial(str(spread)), threshold="0.8", nfeatures="1", tensor_regex=gain
        )
    )
    assert calm.fired == []
    assert calm.steps_evaluated == 3


def test_create_xgboost_report_collects_the_run(tmp_path):
    dtrain, dval = _data()
    _train(tmp_path, dtrain, dval, rounds=2)
    rule = CreateXgboostReport(create_trial(str(tmp_path)))
    assert invoke_rule(rule).fired == []
    step = rule.report_data[1]
    assert set(step["metrics"]) == {"train-rmse", "validation-rmse"}
    assert step["feature_importance"]["feature_importance/weight/f0"] > 0
    assert step["hyperparameters"]["hyperparameters/max_depth"] == 2
    assert sum(step["label_counts"].values()) == dval.num_row()


def test_bad_data_argument_names_it(tmp_path):
    from tornasole.exceptions import ConfigurationError
    from tornasole.xgboost import Hook

    with pytest.raises(ConfigurationError, match="validation_data"):
        Hook(str(tmp_path), validation_data=("/nonexistent.csv", "csv"))
    with pytest.raises(ConfigurationError, match="train_data"):
        Hook(str(tmp_path), train_data=[1, 2])

"""SimilarAcrossRuns, StalledTrainingRule and the XGBoost rules."""

from __future__ import annotations

import numpy as np
import pytest

from tornasole.exceptions import RuleParameterError
from tornasole.rules import create_rule, invoke_rule
from tornasole.rules.generic import (
    CreateXgboostReport,
    FeatureImportanceOverweight,
    SimilarAcrossRuns,
    StalledTrainingRule,
    TreeDepth,
)


def test_similar_across_runs_fires_where_runs_diverge(trial_factory):
    a = trial_factory({s: {"weights/w": np.full(3, float(s))} for s in range(4)})
    b = trial_factory({s: {"weights/w": np.full(3, float(s) + (s >= 2))} for s in range(4)})
    summary = invoke_rule(SimilarAcrossRuns(a, other_trials=[b]))
    assert summary.first_step == 2


def test_similar_across_runs_quiet_on_identical_runs_and_built_from_a_path(trial_factory):
    steps = {s: {"weights/w": np.full(3, float(s))} for s in range(3)}
    a, b = trial_factory(steps), trial_factory(steps)
    rule = create_rule("SimilarAcrossRuns", a, other_trial_0=b.path)
    assert invoke_rule(rule).fired == []


def test_similar_across_runs_requires_another_trial(trial_factory):
    a = trial_factory({0: {"x": np.ones(1)}})
    with pytest.raises(RuleParameterError, match="SimilarAcrossRuns: parameter 'other_trials'"):
        SimilarAcrossRuns(a)


def test_stalled_training_fires_at_the_first_step_after_a_long_gap(trial_factory):
    # wall times written by the test writer are 1000 + step; make a 3000 s gap after step 2
    trial = trial_factory(
        {0: {"x": np.ones(1)}, 1: {"x": np.ones(1)}, 2: {"x": np.ones(1)}, 3002: {"x": np.ones(1)}}
    )
    summary = invoke_rule(StalledTrainingRule(trial, threshold="1800"))
    assert summary.fired_steps == [3002]
    assert summary.fired[0].values["value"] == 3000
    assert "step 3002 was written 3000 s after step 2" in summary.fired[0].details
    assert invoke_rule(StalledTrainingRule(trial, threshold="3600")).fired == []


def test_stalled_training_live_head_uses_the_injected_clock(trial_factory):
    trial = trial_factory({0: {"x": np.ones(1)}, 1: {"x": np.ones(1)}}, end=False)
    now = [1001.0 + 100]
    rule = StalledTrainingRule(trial, threshold="1800", stop_training_on_fire="true", clock=lambda: now[0])
    assert not rule.evaluate(1).fired
    now[0] = 1001.0 + 2000
    out = rule.evaluate(1)
    assert out.fired
    assert "no step written for 2000 s" in out.details
    assert [a.name for a in out.actions] == ["stoptraining"]


def test_stalled_training_quiet_after_training_ended(trial_factory):
    trial = trial_factory({0: {"x": np.ones(1)}})
    rule = StalledTrainingRule(trial, threshold="1", clock=lambda: 1e12)
    assert invoke_rule(rule).fired == []


def _importance(weights):
    return {f"feature_importance/weight/f{i}": np.float32(w) for i, w in enumerate(weights)}


def test_feature_importance_overweight_fires_when_top_features_dominate(trial_factory):
    trial = trial_factory({0: _importance([1, 1, 1, 1, 1]), 1: _importance([30, 10, 5, 1, 1])})
    summary = invoke_rule(FeatureImportanceOverweight(trial))
    assert summary.first_step == 1
    assert summary.fired[0].values["features"][0] == "feature_importance/weight/f0"


def test_feature_importance_overweight_quiet_with_few_features(trial_factory):
    trial = trial_factory({0: _importance([30, 1, 1])})
    assert invoke_rule(FeatureImportanceOverweight(trial)).fired == []


def test_tree_depth_fires_when_trees_stay_shallow(trial_factory):
    trial = trial_factory({0: {"trees/Node": np.arange(31)}, 1: {"trees/Node": np.arange(7)}})
    summary = invoke_rule(TreeDepth(trial, depth="4"))
    assert summary.first_step == 1
    assert "tree depth 2 (largest node id 6) < depth 4" in summary.fired[0].details


def test_tree_depth_quiet_on_deep_trees(trial_factory):
    trial = trial_factory({0: {"trees/Node": np.arange(31)}})
    assert invoke_rule(TreeDepth(trial)).fired == []


def test_create_xgboost_report_collects_and_never_fires(trial_factory):
    colls = {"metrics": ["^train-"], "feature_importance": ["^feature_importance/"], "labels": ["^labels$"]}
    steps = {s: {"train-rmse": np.float32(1.0 / (s + 1)), "labels": np.array([0, 1, 1])} for s in range(2)}
    steps[0].update(_importance([2, 1]))
    trial = trial_factory(steps, collections=colls)
    rule = CreateXgboostReport(trial)
    assert invoke_rule(rule).fired == []
    assert rule.report_data[1]["metrics"] == {"train-rmse": 0.5}
    assert rule.report_data[0]["label_counts"] == {"0": 1, "1": 2}
    assert rule.report_data[0]["feature_importance"]["feature_importance/weight/f0"] == 2.0

"""``recommended_rules()``: DebugRuleConfigurations the evaluator and register_job accept as they are."""

from __future__ import annotations

import json

import numpy as np

from tornasole.rules import create_rule, recommended_rules, rule_names


def test_recommended_rules_are_debug_rule_configurations_with_string_parameters(trial_factory):
    trial = trial_factory({0: {"loss": np.float32(1), "weights/w": np.ones(2)}})
    configs = recommended_rules()
    names = [c["RuleConfigurationName"] for c in configs]
    assert len(names) == len(set(names))
    for c in configs:
        assert set(c) == {"RuleConfigurationName", "RuleParameters"}
        params = c["RuleParameters"]
        assert params["rule_to_invoke"] in rule_names()
        assert all(isinstance(v, str) for v in params.values())
        rule = create_rule(params["rule_to_invoke"], trial, **params)
        outcome = rule.evaluate(0)
        # no validation accuracy (nor an epoch accuracy) saved: not judged
        if params["rule_to_invoke"] in ("SlowConvergence", "OscillatingAccuracy", "ZeroGradients"):
            assert outcome.status == "Skipped"
        else:
            assert outcome.status in ("IssuesFound", "NoIssuesFound")
    json.dumps(configs)
    # a fresh list each call: callers may edit it
    configs[0]["RuleParameters"]["x"] = "y"
    assert "x" not in recommended_rules()[0]["RuleParameters"]

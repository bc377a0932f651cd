"""Registry, construction from string-only and typed parameters, and rule_configs dictionaries."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tornasole.exceptions import ConfigurationError, RuleParameterError
from tornasole.rules import create_rule, get_rule, rule_names
from tornasole.rules import rule_configs as rc

# the minimum each rule needs beyond its defaults, as a configuration would send it (all strings)
REQUIRED = {
    "TensorVariance": {"collection_names": "weights", "max_threshold": "10"},
    "AllZero": {"tensor_regex": ".*"},
    "UnchangedTensor": {"collection_names": "weights"},
}


def _snake(name: str) -> str:
    special = {"NLPSequenceRatio": "nlp_sequence_ratio"}
    return special.get(name, re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower())


@pytest.fixture
def trial(trial_factory):
    return trial_factory({0: {"weights/w": np.ones(2), "loss": np.float32(1)}})


def test_all_table_rules_are_registered():
    # SageMaker's 21 and Tornasole's OscillatingLoss, OscillatingAccuracy, StalledLoss, SlowConvergence,
    # ZeroGradients, ValidationLossNotDecreasing, the nine of issue 30 (LossSpike ...
    # AttentionLogitGrowth), and issue 29's InitialLossTooHigh, SoftmaxBeforeCrossEntropy,
    # RegressionWorseThanMean, InputsNotNormalized, ClassifierNoBetterThanPrior and EarlyLossDivergence
    assert len(rule_names()) == 42
    for name in rule_names():
        assert get_rule(name).__name__ == name


def test_unknown_rule_lists_the_known_names():
    with pytest.raises(
        RuleParameterError, match="Nope: unknown built-in rule 'Nope'; known rules: AllZero, "
    ):
        get_rule("Nope")


@pytest.mark.parametrize("name", sorted(set(rule_names()) - {"SimilarAcrossRuns"}))
def test_every_rule_builds_from_string_parameters_and_evaluates(trial, name):
    params = {"rule_to_invoke": name, **REQUIRED.get(name, {})}
    rule = create_rule(name, trial, **params)
    for p in type(rule).PARAMETERS:
        assert p.default is None or isinstance(p.default, str), (name, p.name)
        assert p.help, (name, p.name)
    outcome = rule.evaluate(0)
    if name == "SlowConvergence":  # the fixture saved no validation accuracy: the step cannot be judged
        assert outcome.status == "Skipped"
        assert "tensor_regex '.*acc(uracy)?$' in EVAL mode" in outcome.details
    elif name in ("OscillatingAccuracy", "ZeroGradients"):  # nor an epoch accuracy
        assert outcome.status == "Skipped"
        assert "regex '.*" in outcome.details
    else:
        assert outcome.status in ("IssuesFound", "NoIssuesFound")


def test_typed_parameters_equal_string_parameters(trial):
    a = create_rule(
        "LossNotDecreasing", trial, num_steps="5", diff_percent="1", use_losses_collection="False"
    )
    b = create_rule("LossNotDecreasing", trial, num_steps=5, diff_percent=1.0, use_losses_collection=False)
    assert a.params == b.params


def test_missing_other_trial_for_similar_across_runs(trial):
    with pytest.raises(RuleParameterError, match="other_trials"):
        create_rule("SimilarAcrossRuns", trial)


def test_rule_configs_match_smdebug_rulesconfig_shape():
    assert rc.vanishing_gradient() == {
        "DebugRuleConfiguration": {
            "RuleConfigurationName": "VanishingGradient",
            "RuleParameters": {"rule_to_invoke": "VanishingGradient"},
        },
        "CollectionConfigurations": [
            {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}}
        ],
    }
    assert "CollectionConfigurations" not in rc.all_zero()
    assert (
        rc.dead_relu()["CollectionConfigurations"][0]["CollectionParameters"]["include_regex"]
        == ".*relu_output"
    )
    for name in rule_names():
        cfg = getattr(rc, _snake(name))()
        assert cfg["DebugRuleConfiguration"]["RuleParameters"] == {"rule_to_invoke": name}
        json.dumps(cfg)


def test_rule_configs_overrides_are_validated_and_stringified():
    params = rc.loss_not_decreasing(num_steps=20, use_losses_collection=False)["DebugRuleConfiguration"][
        "RuleParameters"
    ]
    assert params == {
        "rule_to_invoke": "LossNotDecreasing",
        "num_steps": "20",
        "use_losses_collection": "False",
    }
    with pytest.raises(RuleParameterError, match="parameter 'threshold' value 'x' is not a float"):
        rc.vanishing_gradient(threshold="x")


def test_actions_build_action_json_the_rules_accept(trial):
    actions = rc.ActionList(rc.StopTraining(), rc.Email("ops@example.com"), rc.SMS("+15551234567"))
    actions.update_training_job_prefix_if_not_specified("job-1")
    text = actions.serialize()
    assert json.loads(text)[0] == {"name": "stoptraining", "training_job_prefix": "job-1"}
    rule = create_rule("VanishingGradient", trial, action_json=text)
    assert [(a.name, a.endpoint) for a in rule.actions] == [
        ("stoptraining", None),
        ("email", "ops@example.com"),
        ("sms", "+15551234567"),
    ]
    with pytest.raises(ConfigurationError, match="is not an e-mail address"):
        rc.Email("nope")
    with pytest.raises(ConfigurationError, match="is not a phone number"):
        rc.SMS("555")


def test_step_local_rules_say_so_for_the_evaluator():
    local = {n for n in rule_names() if not get_rule(n).READS_EARLIER_STEPS}
    assert "VanishingGradient" in local
    assert "Confusion" in local
    assert {"LossNotDecreasing", "UnchangedTensor", "WeightUpdateRatio", "StalledTrainingRule"}.isdisjoint(
        local
    )


def test_other_trial_keys_are_not_rule_parameters(trial):
    from tornasole.rules.params import parse_params

    cls = get_rule("SimilarAcrossRuns")
    assert parse_params(cls, {"other_trial_0": "s3://b/x", "other_trials": "a;b", "rule_to_invoke": "X"}) == {
        "collection_names": None,
        "tensor_regex": None,
    }


def test_history_steps_tell_the_evaluator_how_far_back_a_rule_reads(trial):
    assert create_rule("VanishingGradient", trial).history_steps() == 0
    # steps of the other mode (a validation phase) may lie between the compared ones
    assert create_rule("LossNotDecreasing", trial, num_steps="10").history_steps() == 22
    assert create_rule("DeadRelu", trial, min_samples="8").history_steps() == 8
    assert (
        create_rule("UnchangedTensor", trial, collection_names="weights", num_steps="4").history_steps() == 4
    )
    assert create_rule("ClassImbalance", trial).history_steps() is None

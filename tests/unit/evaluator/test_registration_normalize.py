"""Both rule-configuration shapes normalise to the same model; builders mirror the SageMaker SDK."""

from __future__ import annotations

import json

import pytest

from tornasole.evaluator.models import RuleConfig
from tornasole.exceptions import ConfigurationError
from tornasole.jobs import CollectionConfig, Rule, normalise_rules, validate_rule
from tornasole.jobs.normalize import from_debug_rule_configuration, from_rules_specification
from tornasole.rules.actions import Action

SAGEMAKER = {
    "RuleConfigurationName": "LossCheck",
    "RuleEvaluatorImage": "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest",
    "RuleParameters": {
        "rule_to_invoke": "LossNotDecreasing",
        "other_trial_1": "s3://b/run-b",
        "other_trial_0": "s3://b/run-a",
        "start_step": "10",
        "end_step": "200",
        "action_json": '[{"name": "StopTraining"}, {"name": "email", "endpoint": "a@b.c"}]',
        "num_steps": "20",
        "diff_percent": "0.5",
    },
}
LEGACY = {
    "RuleName": "LossNotDecreasing",
    "InstanceType": "ml.c5.4xlarge",
    "RuntimeConfigurations": {
        "start-step": "10",
        "end-step": "200",
        "other-trials-paths": "s3://b/run-a;s3://b/run-b",
        "logging-level": "DEBUG",
        "num_steps": "20",
    },
}


def test_sagemaker_shape_reserved_keys_become_fields() -> None:
    r = from_debug_rule_configuration(SAGEMAKER)
    assert r.name == "LossCheck"
    assert r.rule_to_invoke == "LossNotDecreasing"
    assert r.parameters == {"num_steps": "20", "diff_percent": "0.5"}
    assert r.other_trials == ("s3://b/run-a", "s3://b/run-b")
    assert (r.start_step, r.end_step) == (10, 200)
    assert r.actions == (Action("stoptraining"), Action("email", "a@b.c"))
    assert r.to_sagemaker()["RuleParameters"] == SAGEMAKER["RuleParameters"]
    assert r.active_at(10)
    assert r.active_at(199)
    assert not r.active_at(9)
    assert not r.active_at(200)


def test_2019_shape_normalises_to_the_same_model() -> None:
    r = from_rules_specification(LEGACY)
    assert r.name == r.rule_to_invoke == "LossNotDecreasing"
    assert r.other_trials == ("s3://b/run-a", "s3://b/run-b")
    assert (r.start_step, r.end_step, r.logging_level) == (10, 200, "DEBUG")
    assert r.parameters == {"num_steps": "20"}
    assert r.to_sagemaker()["RuleParameters"]["other_trial_1"] == "s3://b/run-b"


def test_rule_config_round_trips_through_json() -> None:
    r = from_debug_rule_configuration(SAGEMAKER)
    assert RuleConfig.from_json(r.to_json()) == r


def test_whole_configurations_and_mixed_lists_are_accepted() -> None:
    assert [r.name for r in normalise_rules({"rules_specification": [LEGACY]})] == ["LossNotDecreasing"]
    rules = normalise_rules([SAGEMAKER, Rule.custom("Mine", source="s3://b/r.py", rule_to_invoke="MyRule")])
    assert [(r.name, r.source_s3_uri) for r in rules] == [("LossCheck", None), ("Mine", "s3://b/r.py")]


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ([SAGEMAKER, SAGEMAKER], "unique"),
        ([{"RuleConfigurationName": "", "RuleParameters": {}}], "without a RuleConfigurationName"),
        ([{"RuleConfigurationName": "X", "RuleParameters": {"start_step": "ten"}}], "not an integer"),
        ([{"Foo": 1}], "not a rule configuration"),
        ("VanishingGradient", "must be a list"),
        ([{"RuleConfigurationName": "X", "RuleParameters": "threshold=1"}], "must be an object"),
        ([{"RuleConfigurationName": "X", "RuleParameters": {"k": {"a": 1}}}], "must be a string or a number"),
        ([{"RuleConfigurationName": "X", "RuleParameters": {"end_step": 10**13}}], "between 0 and"),
    ],
)
def test_structural_problems_raise_configuration_error(rules: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        normalise_rules(rules)


def test_validate_rule_reasons() -> None:
    ok = from_debug_rule_configuration({"RuleConfigurationName": "VanishingGradient", "RuleParameters": {}})
    assert validate_rule(ok) is None
    typo = from_debug_rule_configuration(
        {"RuleConfigurationName": "VG", "RuleParameters": {"rule_to_invoke": "Nope"}}
    )
    assert "'Nope' is not a built-in rule" in validate_rule(typo)
    custom = from_debug_rule_configuration(
        {"RuleConfigurationName": "C", "RuleParameters": {"source_s3_uri": "https://x/r.py"}}
    )
    assert "not an s3:// URI" in validate_rule(custom)


def test_rule_sagemaker_mirrors_the_sdk() -> None:
    base = {
        "DebugRuleConfiguration": {
            "RuleConfigurationName": "VanishingGradient",
            "RuleParameters": {"rule_to_invoke": "VanishingGradient"},
        },
        "CollectionConfigurations": [
            {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}}
        ],
    }
    r = Rule.sagemaker(
        base,
        name="VG-strict",
        rule_parameters={"threshold": 1e-9},
        other_trials_s3_input_paths=["s3://b/other"],
        actions=[{"name": "stoptraining"}, {"name": "sms", "endpoint": "+1555"}],
    )
    conf = r.to_debugger_rule_config_dict()
    assert conf["RuleConfigurationName"] == "VG-strict"
    assert conf["RuleParameters"]["threshold"] == "1e-09"
    assert conf["RuleParameters"]["other_trial_0"] == "s3://b/other"
    assert json.loads(conf["RuleParameters"]["action_json"]) == [
        {"name": "stoptraining"},
        {"name": "sms", "endpoint": "+1555"},
    ]
    assert r.collections_to_save == base["CollectionConfigurations"]
    only = Rule.sagemaker(base, collections_to_save=[CollectionConfig("weights", {"save_interval": 10})])
    assert only.collections_to_save == [
        {"CollectionName": "weights", "CollectionParameters": {"save_interval": "10"}}
    ]


def test_rule_custom_mirrors_the_sdk() -> None:
    r = Rule.custom(
        name="MyRule",
        image_uri="my-image",
        instance_type="ml.t3.medium",
        volume_size_in_gb=30,
        source="s3://b/rules/my_rule.py",
        rule_to_invoke="CustomGradientRule",
        rule_parameters={"threshold": "10"},
        collections_to_save=[CollectionConfig("gradients")],
        actions='{"name": "email", "endpoint": "a@b.c"}',
    )
    conf = r.to_debugger_rule_config_dict()
    assert conf == {
        "RuleConfigurationName": "MyRule",
        "RuleEvaluatorImage": "my-image",
        "RuleParameters": {
            "threshold": "10",
            "rule_to_invoke": "CustomGradientRule",
            "source_s3_uri": "s3://b/rules/my_rule.py",
            "action_json": '{"name": "email", "endpoint": "a@b.c"}',
        },
        "InstanceType": "ml.t3.medium",
        "VolumeSizeInGB": 30,
    }
    assert from_debug_rule_configuration(conf).actions == (Action("email", "a@b.c"),)

"""Registration is validated before anything is written: names, parameters, every limit, clear messages."""

from __future__ import annotations

import json

import pytest

from tornasole.evaluator.registration import job_limits
from tornasole.evaluator.registration.job_config import (
    decode_action_json,
    from_debug_rule_configuration,
    normalise_rules,
)
from tornasole.evaluator.registration.job_request import (
    spec_from_arguments,
    spec_from_config,
    spec_from_request,
)
from tornasole.exceptions import ConfigurationError, InvalidJobConfiguration, TornasoleValueError
from tornasole.rules.actions import Action

TRIAL = "s3://bucket/run"


def _rule(name: str = "VanishingGradient", **params: object) -> dict:
    return {"RuleConfigurationName": name, "RuleParameters": {"rule_to_invoke": name, **params}}


def _problems(rules: list, hook: object = None, workers: object = None) -> list[str]:
    with pytest.raises(InvalidJobConfiguration) as err:
        spec_from_arguments("my-job", TRIAL, rules, hook, workers)
    return err.value.problems


def test_the_error_is_a_value_error_of_tornasole_listing_every_problem() -> None:
    with pytest.raises(InvalidJobConfiguration) as err:
        spec_from_arguments(
            "my-job", TRIAL, [_rule("VanishingGradiant"), _rule("LossNotDecreasing", numsteps=3)]
        )
    assert isinstance(err.value, ValueError)
    assert isinstance(err.value, TornasoleValueError)
    assert isinstance(err.value, ConfigurationError)
    assert str(err.value).startswith("cannot register job 'my-job': \n  - rule 'VanishingGradiant'")
    assert len(err.value.problems) == 2


def test_unknown_rule_name_says_did_you_mean_and_lists_the_valid_names() -> None:
    from tornasole.rules.registry import BUILTIN_RULES

    (problem,) = _problems([_rule("VanishingGradiant")])
    assert problem == (
        "rule 'VanishingGradiant': 'VanishingGradiant' is not a built-in rule; did you mean "
        f"'VanishingGradient'? built-in rules: {', '.join(sorted(BUILTIN_RULES))} "
        "(a custom rule needs source_s3_uri)"
    )
    (problem,) = _problems([_rule("vanishinggradient")])
    assert "did you mean 'VanishingGradient'?" in problem


def test_unknown_parameter_says_did_you_mean_and_lists_parameters_with_defaults() -> None:
    (problem,) = _problems([_rule("LossNotDecreasing", numsteps="3")])
    assert problem.startswith(
        "rule 'LossNotDecreasing' (LossNotDecreasing): 'numsteps' is not a parameter of LossNotDecreasing; "
        "did you mean 'num_steps'? valid parameters: "
    )
    assert "num_steps (int, default 10)" in problem
    assert "diff_percent (float, default 0.1)" in problem
    assert "mode (mode, unset)" in problem


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"num_steps": "twenty"}, "parameter 'num_steps'='twenty' is not an integer"),
        ({"diff_percent": "half"}, "parameter 'diff_percent'='half' is not a number"),
        (
            {"use_losses_collection": "maybe"},
            "parameter 'use_losses_collection'='maybe' is not true or false",
        ),
    ],
)
def test_bad_values_name_rule_parameter_value_and_expected_type(params: dict, expected: str) -> None:
    (problem,) = _problems([_rule("LossNotDecreasing", **params)])
    assert problem == f"rule 'LossNotDecreasing' (LossNotDecreasing): {expected}"


def test_numeric_parameter_values_are_accepted_on_purpose() -> None:
    spec = spec_from_arguments(
        "my-job",
        TRIAL,
        [_rule("LossNotDecreasing", num_steps=20, diff_percent=0.5, use_losses_collection=True)],
    )
    (rule,) = spec.rules
    assert rule.parameters == {"num_steps": "20", "diff_percent": "0.5", "use_losses_collection": "True"}
    assert rule.rule_parameters["num_steps"] == "20"


def test_rule_count_limit_is_the_transaction_size_less_the_job_items() -> None:
    assert job_limits.MAX_RULES_PER_JOB == 96
    rules = [_rule("VanishingGradient") | {"RuleConfigurationName": f"vg-{i}"} for i in range(96)]
    assert len(spec_from_arguments("my-job", TRIAL, rules).rules) == 96
    extra = [*rules, _rule("VanishingGradient") | {"RuleConfigurationName": "vg-96"}]
    (problem,) = _problems(extra)
    assert problem.startswith("97 rules; a job holds at most 96 (registration is one DynamoDB transaction")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("R" * 1100, "is 1100 characters long; the limit is 256"),
        ("Loss\u202eCheck", "contains control or bidi characters (U+202E)"),
        ("Loss\x00Check", "contains control or bidi characters (U+0000)"),
        ("zero\u200bwidth", "contains control or bidi characters (U+200B)"),
        ("@job", "may not start with '@' or contain '#'"),
        ("a#b", "may not start with '@' or contain '#'"),
    ],
)
def test_rule_names_are_bounded_and_printable(name: str, expected: str) -> None:
    (problem,) = _problems([{"RuleConfigurationName": name, "RuleParameters": {"rule_to_invoke": "AllZero"}}])
    assert expected in problem


def test_parameter_sizes_and_counts_are_bounded() -> None:
    (problem,) = _problems([_rule("AllZero", collection_names="x" * 3000)])
    assert (
        problem == "rule 'AllZero': parameter 'collection_names' is 3000 characters long; the limit is 2048"
    )
    many = {f"p{i}": "1" for i in range(120)}
    problems = _problems([_rule("AllZero", **many)])
    assert problems[0] == "rule 'AllZero' has 121 parameters; the limit is 100"


def test_hook_config_is_bounded_in_size_depth_and_shape() -> None:
    big = {"HookParameters": {"include_regex": "x" * (40 * 1024)}}
    (problem,) = _problems([_rule()], big)
    assert problem.startswith("DebugHookConfig is ")
    assert problem.endswith("bytes of JSON; the limit is 32768")
    deep: dict = {}
    node = deep
    for _ in range(40):
        node["x"] = {}
        node = node["x"]
    (problem,) = _problems([_rule()], {"HookParameters": deep})
    assert problem == "DebugHookConfig is nested deeper than 16 levels"
    (problem,) = _problems([_rule()], {"CollectionConfigurations": [{"CollectionParameters": {}}]})
    assert problem == (
        "DebugHookConfig.CollectionConfigurations[0] needs a CollectionName: printable text of at most 256 "
        "characters"
    )
    (problem,) = _problems([_rule()], "not an object")
    assert problem == "DebugHookConfig must be an object, got str"


@pytest.mark.parametrize("value", [float("inf"), 1e400, -1, 0, 2.5, "two", True, 10**9, [2]])
def test_num_workers_must_be_a_sane_whole_number(value: object) -> None:
    (problem,) = _problems([_rule()], workers=value)
    assert problem == f"NumWorkers={value!r} must be a whole number of workers between 1 and 4096"


@pytest.mark.parametrize(("value", "expected"), [(2, 2), (2.0, 2), ("3", 3), (None, None)])
def test_num_workers_accepts_whole_numbers(value: object, expected: int | None) -> None:
    assert spec_from_arguments("my-job", TRIAL, [_rule()], num_workers=value).num_workers == expected


def test_num_workers_1e400_in_a_job_file_is_a_clear_error() -> None:
    config = json.loads('{"TrainingJobName": "my-job", "NumWorkers": 1e400, "DebugRuleConfigurations": []}')
    with pytest.raises(InvalidJobConfiguration, match=r"NumWorkers=inf must be a whole number"):
        spec_from_config({**config, "DebugRuleConfigurations": [_rule()]}, TRIAL)


@pytest.mark.parametrize(
    "raw",
    [
        '[{"name": "StopTraining"}, {"name": "email", "endpoint": "a@b.c"}]',
        '[{\\"name\\": \\"StopTraining\\"}, {\\"name\\": \\"email\\", \\"endpoint\\": \\"a@b.c\\"}]',
        json.dumps(json.dumps([{"name": "StopTraining"}, {"name": "email", "endpoint": "a@b.c"}])),
        [{"name": "StopTraining"}, {"name": "email", "endpoint": "a@b.c"}],
    ],
    ids=["plain", "escaped-quotes-as-the-sdk-sends", "json-string-of-json", "parsed"],
)
def test_action_json_is_accepted_escaped_or_not(raw: object) -> None:
    assert decode_action_json("R", raw) == (Action("stoptraining"), Action("email", "a@b.c"))


def test_bad_action_json_names_rule_and_field() -> None:
    with pytest.raises(InvalidJobConfiguration, match=r"R: parameter 'action_json' is not valid JSON"):
        decode_action_json("R", "[{name: stop}]")
    with pytest.raises(InvalidJobConfiguration, match=r"unknown action 'reboot'"):
        decode_action_json("R", '[{\\"name\\": \\"reboot\\"}]')


def test_per_rule_resources_and_images_are_kept() -> None:
    r = from_debug_rule_configuration(
        {
            **_rule("AllZero"),
            "RuleEvaluatorImage": "img:1",
            "InstanceType": "ml.t3.medium",
            "VolumeSizeInGB": 30,
        }
    )
    assert r.to_sagemaker() == {
        "RuleConfigurationName": "AllZero",
        "RuleEvaluatorImage": "img:1",
        "RuleParameters": {"rule_to_invoke": "AllZero"},
        "InstanceType": "ml.t3.medium",
        "VolumeSizeInGB": 30,
    }


def test_output_paths_and_job_names_are_checked() -> None:
    with pytest.raises(InvalidJobConfiguration, match="must be an s3://bucket/prefix URI"):
        spec_from_arguments("my-job", "/tmp/run", [_rule()])
    with pytest.raises(InvalidJobConfiguration, match="training job name 'my_job' must be 1-63 letters"):
        spec_from_arguments("my_job", TRIAL, [_rule()])
    with pytest.raises(InvalidJobConfiguration, match="other trial 'runs/b' is not an s3:// path"):
        spec_from_arguments("my-job", TRIAL, [_rule("SimilarAcrossRuns", other_trial_0="runs/b")])


def test_job_file_location_may_follow_sagemakers_convention() -> None:
    config = {
        "TrainingJobName": "my-job",
        "S3OutputPath": "s3://bucket/",
        "DebugRuleConfigurations": [_rule()],
    }
    spec = spec_from_config(config, "s3://bucket/my-job/debug-output")
    assert spec.trial_path == "s3://bucket/my-job/debug-output"
    assert spec.hook_config["S3OutputPath"] == "s3://bucket"
    assert spec_from_config(config, "s3://bucket").trial_path == "s3://bucket"
    with pytest.raises(
        InvalidJobConfiguration, match="does not match the file's location s3://bucket/elsewhere"
    ):
        spec_from_config(config, "s3://bucket/elsewhere")


def test_request_trial_path_follows_sagemakers_convention() -> None:
    request = {
        "TrainingJobName": "my-job",
        "DebugHookConfig": {"S3OutputPath": "s3://bucket/"},
        "DebugRuleConfigurations": [_rule()],
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
    }
    spec = spec_from_request(request)
    assert spec.trial_path == "s3://bucket/my-job/debug-output"
    assert spec.describe_fields == {"ResourceConfig": request["ResourceConfig"]}
    with pytest.raises(InvalidJobConfiguration, match="no DebugHookConfig.S3OutputPath"):
        spec_from_request({k: v for k, v in request.items() if k != "DebugHookConfig"})


def test_parameters_given_as_a_string_are_a_clear_error() -> None:
    with pytest.raises(InvalidJobConfiguration, match="rule 'X': RuleParameters must be an object, got str"):
        normalise_rules([{"RuleConfigurationName": "X", "RuleParameters": "threshold=0.1"}])


def test_collection_and_hook_parameters_are_bounded_text() -> None:
    hook = {
        "HookParameters": {"save_interval": {"nested": 1}},
        "CollectionConfigurations": [{"CollectionName": "losses", "CollectionParameters": {"k": "v" * 3000}}],
    }
    assert _problems([_rule()], hook) == [
        "collection 'losses': CollectionParameters: 'k' is longer than 2048 characters",
        "DebugHookConfig.HookParameters: 'save_interval' must be a string or a number, got dict",
    ]


def test_tensorboard_output_config_is_kept_for_describe() -> None:
    request = {
        "TrainingJobName": "my-job",
        "DebugHookConfig": {"S3OutputPath": "s3://bucket/"},
        "DebugRuleConfigurations": [_rule()],
        "TensorBoardOutputConfig": {"S3OutputPath": "s3://bucket/tb"},
    }
    assert spec_from_request(request).describe_fields == {
        "TensorBoardOutputConfig": {"S3OutputPath": "s3://bucket/tb"}
    }


def test_rule_builders_collections_count_toward_the_hook_config_size() -> None:
    from tornasole.jobs import CollectionConfig, Rule

    colls = [CollectionConfig(f"c{i}", {"include_regex": "x" * 2000}) for i in range(20)]
    rule = Rule.custom(
        "Mine", source="s3://bucket/rules/r.py", rule_to_invoke="Mine", collections_to_save=colls
    )
    with pytest.raises(
        InvalidJobConfiguration, match=r"DebugHookConfig is \d+ bytes of JSON; the limit is 32768"
    ):
        spec_from_arguments("my-job", TRIAL, [rule])


@pytest.mark.parametrize("value", ["9" * 5000, "\u00b2", "٣"])
def test_num_workers_text_must_be_a_short_ascii_number(value: str) -> None:
    (problem,) = _problems([_rule()], workers=value)
    assert problem.startswith("NumWorkers=")

"""What a job file may ask for, and the patterns any registration may carry (issue #34 N2, N3, N4)."""

from __future__ import annotations

import pytest

from tornasole.evaluator.registration import job_limits, job_request
from tornasole.exceptions import InvalidJobConfiguration

VG = {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"threshold": "0.001"}}


@pytest.mark.parametrize(
    ("name", "trial", "bound"),
    [
        ("j1", "s3://b/jobs/j1", True),
        ("j1", "s3://b/jobs/j1/", True),
        ("j1", "s3://b/out/j1/debug-output", True),
        ("j1", "s3://b/jobs/j1-evil", False),
        ("prod-training-42", "s3://b/jobs/attacker", False),
        ("debug-output", "s3://b/out/j1/debug-output", True),  # the folder is its name
    ],
)
def test_a_job_files_name_is_bound_to_its_folder(name: str, trial: str, bound: bool) -> None:
    assert job_request.name_bound_to_trial(name, trial) is bound


def test_every_scope_problem_of_a_job_file_is_listed() -> None:
    config = {
        "TrainingJobName": "other",
        "DebugRuleConfigurations": [
            {
                "RuleConfigurationName": "SimilarAcrossRuns",
                "RuleParameters": {"other_trial_0": "s3://b/jobs/victim"},
            }
        ],
    }
    spec = job_request.spec_from_config(config, "s3://b/jobs/mine")
    problems = job_request.file_scope_problems(spec, "s3://b/jobs/mine")
    assert len(problems) == 2
    assert problems[0].startswith("a job file at s3://b/jobs/mine may only register a job named 'mine'")
    assert "'s3://b/jobs/victim' is outside it" in problems[1]


def test_a_hook_configs_catastrophic_include_regex_is_refused_at_registration() -> None:
    hook = {
        "CollectionConfigurations": [
            {"CollectionName": "losses", "CollectionParameters": {"include_regex": "loss.*,(a|a)+$"}}
        ]
    }
    with pytest.raises(InvalidJobConfiguration) as err:
        job_request.spec_from_arguments("j", "s3://bkt/jobs/j", [VG], hook)
    assert err.value.problems == [
        "collection 'losses': include_regex '(a|a)+$': an alternation or lookaround inside a repeat "
        "(as in '(a|a)+') can take exponential time"
    ]


def test_hook_parameters_include_regex_is_checked_too() -> None:
    problems = job_limits._regex_problems("DebugHookConfig.HookParameters", {"include_regex": "(a+)+"})
    assert problems == [
        "DebugHookConfig.HookParameters: include_regex '(a+)+': a repeat inside a repeat (as in '(a+)+') "
        "can take exponential time"
    ]

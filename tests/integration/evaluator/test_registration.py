"""Registering jobs: API, configuration file, idempotency, explicit rule updates, read-back."""

from __future__ import annotations

import json

import pytest
from evaluator_stack import BUCKET, TRIAL, Stack, event_ids

from tornasole.aws.clients import client
from tornasole.exceptions import InvalidJobConfiguration
from tornasole.jobs import (
    JobConflictError,
    JobNotFoundError,
    Rule,
    TornasoleJobs,
    describe,
    list_jobs,
    rule_job_summary,
)
from tornasole.rules import rule_configs
from tornasole.rules.registry import BUILTIN_RULES

VG = {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"rule_to_invoke": "VanishingGradient"}}


def test_register_via_api_and_read_back_sagemaker_shapes(stack: Stack) -> None:
    rule = Rule.sagemaker(
        {
            "DebugRuleConfiguration": {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {}},
            "CollectionConfigurations": [
                {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}}
            ],
        },
        rule_parameters={"threshold": "1e-7"},
    )
    d = TornasoleJobs().register_job("my-job", TRIAL + "/", [rule])
    assert d["TrainingJobStatus"] == "InProgress"
    assert d["SecondaryStatus"] == "Training"
    assert d["TrainingJobArn"] == "arn:aws:tornasole:us-east-1:123456789012:training-job/my-job"
    assert d["DebugHookConfig"] == {
        "S3OutputPath": TRIAL,
        "CollectionConfigurations": [
            {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}}
        ],
    }
    assert d["DebugRuleConfigurations"] == [
        {
            "RuleConfigurationName": "VanishingGradient",
            "RuleEvaluatorImage": "tornasole",
            "RuleParameters": {"rule_to_invoke": "VanishingGradient", "threshold": "1e-7"},
        }
    ]
    assert describe("my-job") == d
    assert rule_job_summary("my-job") == d["DebugRuleEvaluationStatuses"]
    assert d["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] == "InProgress"
    assert d["DebugRuleEvaluationStatuses"][0]["RuleEvaluationJobArn"].endswith(
        "my-job/rule/VanishingGradient"
    )


def test_re_registering_is_idempotent_and_changing_rules_is_explicit(stack: Stack) -> None:
    jobs = TornasoleJobs()
    first = jobs.register_job("my-job", TRIAL, [VG])
    assert jobs.register_job("my-job", TRIAL, [VG]) == first
    with pytest.raises(JobConflictError, match="update_job_rules"):
        jobs.register_job("my-job", TRIAL, [VG, {**VG, "RuleConfigurationName": "Other"}])
    with pytest.raises(JobConflictError, match="belongs to job 'my-job'"):
        jobs.register_job("other-job", TRIAL, [VG])
    # an explicit update keeps unchanged rules' statuses and starts new ones
    stack.write_collections()
    stack.write_step(0, grad=1e-9)
    for note in stack.notifications():
        stack.deliver(note)
    updated = jobs.update_job_rules("my-job", [VG, {**VG, "RuleConfigurationName": "Other"}])
    assert [
        (s["RuleConfigurationName"], s["RuleEvaluationStatus"])
        for s in updated["DebugRuleEvaluationStatuses"]
    ] == [
        ("VanishingGradient", "IssuesFound"),
        ("Other", "InProgress"),
    ]
    stack.pump_stream()
    assert event_ids(stack.events()) == [
        "my-job:1:job:InProgress",
        "my-job:1:issue/VanishingGradient/0",
        "my-job:1:rule/VanishingGradient:IssuesFound",
        "my-job:2:job:RulesUpdated",
    ]
    with pytest.raises(JobNotFoundError):
        jobs.describe("nope")


def test_configuration_file_registers_the_2019_shape(stack: Stack) -> None:
    stack.put_job_config(
        {
            "TrainingJobName": "my-job",
            "rules_specification": [
                {
                    "RuleName": "VanishingGradient",
                    "RuntimeConfigurations": {
                        "start-step": "5",
                        "end-step": "100",
                        "threshold": "0.01",
                        "logging-level": "DEBUG",
                    },
                }
            ],
        }
    )
    (note,) = stack.notifications()
    assert stack.deliver(note)["results"][0]["action"] == "registered"
    d = describe("my-job")
    assert d["DebugRuleConfigurations"][0]["RuleParameters"] == {
        "rule_to_invoke": "VanishingGradient",
        "start_step": "5",
        "end_step": "100",
        "threshold": "0.01",
        "logging_level": "DEBUG",
    }
    # the same file again (an S3 duplicate) changes nothing
    assert stack.deliver(note)["results"][0]["action"] == "unchanged"


def test_invalid_rules_are_refused_before_anything_is_written(stack: Stack) -> None:
    jobs = TornasoleJobs(allowed_rule_prefixes=("s3://tornasole-trials/rules/",))
    with pytest.raises(InvalidJobConfiguration) as err:
        jobs.register_job(
            "my-job",
            TRIAL,
            [
                {"RuleConfigurationName": "Typo", "RuleParameters": {"rule_to_invoke": "VanishingGradiant"}},
                {
                    "RuleConfigurationName": "BadParam",
                    "RuleParameters": {"rule_to_invoke": "VanishingGradient", "threshold": "abc"},
                },
            ],
        )
    assert err.value.problems == [
        "rule 'Typo': 'VanishingGradiant' is not a built-in rule; did you mean 'VanishingGradient'? "
        f"built-in rules: {', '.join(sorted(BUILTIN_RULES))} (a custom rule needs source_s3_uri)",
        "rule 'BadParam' (VanishingGradient): parameter 'threshold'='abc' is not a number",
    ]
    with pytest.raises(JobNotFoundError):
        describe("my-job")
    assert list_jobs() == []


def test_custom_rule_sources_outside_the_allowed_prefixes_start_in_error(stack: Stack) -> None:
    d = TornasoleJobs(allowed_rule_prefixes=("s3://tornasole-trials/rules/",)).register_job(
        "my-job",
        TRIAL,
        [
            Rule.custom("Outside", source="s3://someone-else/rule.py", rule_to_invoke="MyRule"),
            Rule.custom("Inside", source="s3://tornasole-trials/rules/rule.py", rule_to_invoke="MyRule"),
        ],
    )
    by_name = {s["RuleConfigurationName"]: s for s in d["DebugRuleEvaluationStatuses"]}
    assert by_name["Outside"]["RuleEvaluationStatus"] == "Error"
    assert "outside the allowed prefixes" in by_name["Outside"]["StatusDetails"]
    assert by_name["Inside"]["RuleEvaluationStatus"] == "InProgress"
    assert d["TrainingJobStatus"] == "InProgress"


def test_malformed_configuration_file_is_recorded_as_a_failed_registration(stack: Stack) -> None:
    stack.put_job_config({"TrainingJobName": "my-job"})  # no rules
    (note,) = stack.notifications()
    result = stack.deliver(note)["results"][0]
    assert result["action"] == "invalid"
    error = TornasoleJobs().trial_error(TRIAL)
    assert error["key"] == "jobs/my-job/tornasole_job.json"
    assert "neither DebugRuleConfigurations nor rules_specification" in error["reason"]
    d = describe("my-job")
    assert (d["TrainingJobStatus"], d["SecondaryStatus"]) == ("Failed", "Failed")
    assert d["FailureReason"] == (
        f"{TRIAL}/tornasole_job.json: cannot register the job: "
        "the job configuration has neither DebugRuleConfigurations nor rules_specification"
    )
    assert d["DebugRuleEvaluationStatuses"] == []
    client("s3").put_object(
        Bucket="tornasole-trials", Key="jobs/my-job/tornasole_job.json", Body=b"{not json"
    )
    (note,) = stack.notifications()
    assert stack.deliver(note)["results"][0]["action"] == "invalid"
    reason = TornasoleJobs().trial_error(TRIAL)["reason"]
    assert "cannot register the job: the file is not valid JSON" in reason
    rows = list_jobs()
    assert [(r["name"], r["status"], r["trial_path"]) for r in rows] == [
        (None, "Failed", TRIAL),  # the file without a usable name is listed by its trial
        ("my-job", "Failed", TRIAL),
    ]
    assert "not valid JSON" in rows[0]["failure_reason"]
    assert rows[1]["failure_reason"] == d["FailureReason"]
    # a corrected file registers the job and settles both failure records
    stack.put_job_config({"TrainingJobName": "my-job", "DebugRuleConfigurations": [VG]})
    (note,) = stack.notifications()
    assert stack.deliver(note)["results"][0]["action"] == "registered"
    assert describe("my-job")["TrainingJobStatus"] == "InProgress"
    assert "FailureReason" not in describe("my-job")
    assert [(r["name"], r["status"]) for r in list_jobs()] == [("my-job", "InProgress")]


CUSTOM_RULE = b"""
from smdebug.rules.rule import Rule


class LossAbove(Rule):
    def __init__(self, base_trial, threshold="0.5"):
        super().__init__(base_trial)
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        return float(self.base_trial.tensor("loss").value(step).mean()) > self.threshold
"""


def test_custom_rule_files_on_s3_run_in_the_evaluator(stack: Stack) -> None:
    s3 = client("s3")
    s3.put_object(Bucket=BUCKET, Key="rules/loss_above.py", Body=CUSTOM_RULE)
    s3.put_object(Bucket=BUCKET, Key="rules/broken.py", Body=b"def oops(:\n")
    TornasoleJobs().register_job(
        "my-job",
        TRIAL,
        [
            Rule.custom(
                "LossAbove",
                source=f"s3://{BUCKET}/rules/loss_above.py",
                rule_to_invoke="LossAbove",
                rule_parameters={"threshold": "0.5"},
            ),
            Rule.custom("Broken", source=f"s3://{BUCKET}/rules/broken.py", rule_to_invoke="Broken"),
            Rule.custom("Elsewhere", source="s3://someone-else/rule.py", rule_to_invoke="LossAbove"),
        ],
    )
    assert rule_job_summary("my-job")[2]["RuleEvaluationStatus"] == "InProgress"  # the API did not restrict
    stack.write_collections()
    stack.write_step(0, loss=0.1)
    stack.write_step(5, loss=0.9)
    for note in stack.notifications():
        stack.deliver(note)
    by_name = {s["RuleConfigurationName"]: s for s in rule_job_summary("my-job")}
    assert by_name["LossAbove"]["RuleEvaluationStatus"] == "IssuesFound"
    assert "step 5" in by_name["LossAbove"]["StatusDetails"]
    assert by_name["Broken"]["RuleEvaluationStatus"] == "Error"
    assert "syntax error" in by_name["Broken"]["StatusDetails"]
    # the evaluator (TORNASOLE_TRIAL_BUCKET set) never loads a source outside its allowed prefixes
    assert by_name["Elsewhere"]["RuleEvaluationStatus"] == "Error"
    assert "outside the allowed prefixes ['s3://tornasole-trials/']" in by_name["Elsewhere"]["StatusDetails"]


def test_rule_configs_builders_and_job_listing(stack: Stack) -> None:
    rule = Rule.sagemaker(
        rule_configs.vanishing_gradient(threshold=1e-5),
        actions=rule_configs.ActionList(rule_configs.StopTraining(), rule_configs.Email("ml@example.com")),
    )
    d = TornasoleJobs().register_job("my-job", TRIAL, [rule])
    params = d["DebugRuleConfigurations"][0]["RuleParameters"]
    assert (params["rule_to_invoke"], params["threshold"]) == ("VanishingGradient", "1e-05")
    assert json.loads(params["action_json"])[1] == {"name": "email", "endpoint": "ml@example.com"}
    assert d["DebugHookConfig"]["CollectionConfigurations"] == [
        {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}}
    ]
    TornasoleJobs().register_job("job-2", f"s3://{BUCKET}/jobs/job-2", [rule])
    assert list_jobs() == [
        {
            "name": "job-2",
            "status": "InProgress",
            "rules": 1,
            "issues": 0,
            "trial_path": f"s3://{BUCKET}/jobs/job-2",
        },
        {"name": "my-job", "status": "InProgress", "rules": 1, "issues": 0, "trial_path": TRIAL},
    ]

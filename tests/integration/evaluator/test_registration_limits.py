"""Hostile or broken registrations: refused up front by the API, recorded (never crashing) from a file."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
from evaluator_stack import BUCKET, TRIAL, Stack, event_ids

from tornasole.aws.clients import client
from tornasole.evaluator.registration.job_limits import MAX_RULES_PARAMETERS_BYTES
from tornasole.exceptions import InvalidJobConfiguration
from tornasole.jobs import JobConflictError, TornasoleJobs, describe, list_jobs, update_job_rules

VG = {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"rule_to_invoke": "VanishingGradient"}}
KEY = "jobs/my-job/tornasole_job.json"


def _rules(n: int) -> list[dict]:
    return [{**VG, "RuleConfigurationName": f"vg-{i}"} for i in range(n)]


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


HOSTILE_FILES = {
    "97 rules": (
        json.dumps({"TrainingJobName": "my-job", "DebugRuleConfigurations": _rules(97)}),
        "97 rules; a job holds at most 96",
    ),
    "1100-character rule name": (
        json.dumps(
            {
                "TrainingJobName": "my-job",
                "DebugRuleConfigurations": [{**VG, "RuleConfigurationName": "R" * 1100}],
            }
        ),
        "is 1100 characters long; the limit is 256",
    ),
    "bidi characters in a rule name": (
        json.dumps(
            {
                "TrainingJobName": "my-job",
                "DebugRuleConfigurations": [{**VG, "RuleConfigurationName": "ok\u202egol"}],
            }
        ),
        "contains control or bidi characters (U+202E)",
    ),
    "500 KB hook config": (
        json.dumps(
            {
                "TrainingJobName": "my-job",
                "DebugRuleConfigurations": [VG],
                "DebugHookConfig": {"HookParameters": {"include_regex": "x" * 500_000}},
            }
        ),
        "bytes of JSON; the limit is 32768",
    ),
    "NumWorkers 1e400": (
        '{"TrainingJobName": "my-job", "NumWorkers": 1e400, "DebugRuleConfigurations": '
        + json.dumps([VG])
        + "}",
        "NumWorkers=inf must be a whole number of workers between 1 and 4096",
    ),
    "parameters as a string": (
        json.dumps(
            {
                "TrainingJobName": "my-job",
                "DebugRuleConfigurations": [{"RuleConfigurationName": "VG", "RuleParameters": "threshold=1"}],
            }
        ),
        "rule 'VG': RuleParameters must be an object, got str",
    ),
    "deeply nested JSON": (
        '{"TrainingJobName": "my-job", "DebugRuleConfigurations": [], "x": ' + _deep(100_000) + "}",
        "nested too deeply",
    ),
    "moderately nested JSON": (
        '{"TrainingJobName": "my-job", "DebugRuleConfigurations": [], "x": ' + _deep(50) + "}",
        "the job configuration is nested deeper than 16 levels",
    ),
    "a typo in a rule name": (
        json.dumps(
            {
                "TrainingJobName": "my-job",
                "DebugRuleConfigurations": [
                    {"RuleConfigurationName": "VG", "RuleParameters": {"rule_to_invoke": "VanishingGradiant"}}
                ],
            }
        ),
        "did you mean 'VanishingGradient'?",
    ),
    "rule code named by a file": (
        json.dumps(
            {
                "TrainingJobName": "my-job",
                "rules_specification": [{"RuleName": "Mine", "SourceS3Uri": f"s3://{BUCKET}/rules/mine.py"}],
            }
        ),
        "may not name rule code (custom rules ['Mine'])",
    ),
    "a 2 MB file": (
        json.dumps({"TrainingJobName": "my-job", "DebugRuleConfigurations": [VG], "pad": "x" * 2_000_000}),
        "the file is larger than 1048576 bytes",
    ),
}


UNREADABLE = {"deeply nested JSON", "a 2 MB file"}


@pytest.mark.parametrize("case", sorted(HOSTILE_FILES))
def test_a_hostile_job_file_is_recorded_as_a_failed_registration(stack: Stack, case: str) -> None:
    body, expected = HOSTILE_FILES[case]
    client("s3").put_object(Bucket=BUCKET, Key=KEY, Body=body.encode())
    (note,) = stack.notifications()
    result = stack.deliver(note)["results"][0]  # the handler returns: nothing goes to the DLQ
    assert result["action"] == "invalid"
    assert expected in result["reason"]
    (row,) = list_jobs()
    assert (row["status"], row["trial_path"]) == ("Failed", TRIAL)
    assert expected in row["failure_reason"]
    if case in UNREADABLE:  # no name could be read: listed by its trial
        assert row["name"] is None
    else:
        assert row["name"] == "my-job"
        d = describe("my-job")
        assert d["TrainingJobStatus"] == "Failed"
        assert d["FailureReason"].startswith(f"{TRIAL}/tornasole_job.json: cannot register the job: ")
        assert expected in d["FailureReason"]
        assert d["DebugRuleEvaluationStatuses"] == []
    stack.pump_stream()
    assert stack.events() == []  # a failed registration announces no job
    key = row["name"] or f"?{TRIAL}"
    item = TornasoleJobs().table.get("JOBS", key)
    assert item["expires_at"] > time.time() + 29 * 24 * 3600  # listed for 30 days unless replaced


def test_a_bad_file_never_replaces_a_registered_job(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    stack.put_job_config({"TrainingJobName": "my-job", "DebugRuleConfigurations": _rules(97)})
    (note,) = stack.notifications()
    assert stack.deliver(note)["results"][0]["action"] == "invalid"
    d = describe("my-job")
    assert d["TrainingJobStatus"] == "InProgress"
    assert "97 rules" in TornasoleJobs().trial_error(TRIAL)["reason"]


def test_api_registration_raises_and_writes_nothing(stack: Stack) -> None:
    with pytest.raises(InvalidJobConfiguration, match="97 rules; a job holds at most 96"):
        TornasoleJobs().register_job("my-job", TRIAL, _rules(97))
    assert len(TornasoleJobs().register_job("my-job", TRIAL, _rules(96))["DebugRuleConfigurations"]) == 96


def test_a_missing_bucket_is_an_error_at_registration(stack: Stack) -> None:
    with pytest.raises(InvalidJobConfiguration, match="bucket 'no-such-bucket' of s3://no-such-bucket/run"):
        TornasoleJobs().register_job("my-job", "s3://no-such-bucket/run", [VG])
    assert list_jobs() == []


def test_describe_returns_datetimes_as_boto3_does(stack: Stack) -> None:
    clock = iter([1_700_000_000.0, 1_700_000_000.0, 1_700_000_000.0, 1_700_000_000.0])
    jobs = TornasoleJobs(clock=lambda: next(clock, 1_700_000_000.0))
    d = jobs.register_job("my-job", TRIAL, [VG])
    when = datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert (d["CreationTime"], d["TrainingStartTime"], d["LastModifiedTime"]) == (when, when, when)
    assert d["DebugRuleEvaluationStatuses"][0]["LastModifiedTime"] == when
    raw = jobs.describe("my-job", datetimes=False)
    assert raw["CreationTime"] == "1700000000000"  # the events' form


def test_update_with_a_new_output_path_moves_the_job(stack: Stack) -> None:
    jobs = TornasoleJobs()
    jobs.register_job("my-job", TRIAL, [VG])
    new = f"s3://{BUCKET}/jobs/my-job-v2"
    d = update_job_rules("my-job", [VG], s3_output_path=new + "/")
    assert d["DebugHookConfig"]["S3OutputPath"] == new
    assert [r["trial_path"] for r in list_jobs()] == [new]
    assert jobs.table.job_for_trial(new) == "my-job"
    assert jobs.table.job_for_trial(TRIAL) is None
    # steps now land under the new path and are evaluated for the job
    stack.write_collections(trial=new)
    stack.write_step(0, grad=1e-9, trial=new)
    for note in stack.notifications():
        stack.deliver(note)
    assert describe("my-job")["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] == "IssuesFound"
    stack.pump_stream()
    assert "my-job:2:job:RulesUpdated" in event_ids(stack.events())
    # a path owned by another job is refused, and nothing moves
    jobs.register_job("other-job", f"s3://{BUCKET}/jobs/other", [VG])
    with pytest.raises(JobConflictError, match="belongs to job 'other-job'"):
        jobs.update_job_rules("my-job", [VG], s3_output_path=f"s3://{BUCKET}/jobs/other")
    assert describe("my-job")["DebugHookConfig"]["S3OutputPath"] == new
    with pytest.raises(InvalidJobConfiguration, match="bucket 'nope-bucket'"):
        jobs.update_job_rules("my-job", [VG], s3_output_path="s3://nope-bucket/x")


def test_the_largest_accepted_registration_fits_dynamodb(stack: Stack) -> None:
    # 96 rules whose parameters together come just under the limit: every item, the InProgress event
    # (which carries them all) and the transaction fit; one more byte per rule is refused up front
    per_rule = MAX_RULES_PARAMETERS_BYTES // 96
    rules = [
        {
            "RuleConfigurationName": f"az-{i:02d}",
            "RuleParameters": {"rule_to_invoke": "AllZero", "collection_names": ""},
        }
        for i in range(96)
    ]
    for r in rules:
        used = sum(len(k) + len(v) for k, v in r["RuleParameters"].items())
        r["RuleParameters"]["collection_names"] = "c" * (per_rule - used)
    d = TornasoleJobs().register_job("my-job", TRIAL, rules)
    assert len(d["DebugRuleEvaluationStatuses"]) == 96
    stack.pump_stream()
    (event,) = stack.events()
    assert len(event["detail"]["DebugRuleConfigurations"]) == 96
    for r in rules:
        r["RuleParameters"]["collection_names"] += "cc"
    with pytest.raises(InvalidJobConfiguration, match="the rules' parameters take 196800 bytes together"):
        TornasoleJobs().register_job("job-2", f"s3://{BUCKET}/jobs/job-2", rules)

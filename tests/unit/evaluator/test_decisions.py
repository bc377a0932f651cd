"""Pure transition decisions and the SageMaker-shaped details built from a JobState."""

from __future__ import annotations

import dataclasses
import json

from tornasole.evaluator import decisions
from tornasole.evaluator.details import MAX_STATUS_DETAILS, describe, issue_detail, step_files
from tornasole.evaluator.models import JobState, JobStatus, RuleConfig, RuleState, RuleStatus, job_arn
from tornasole.evaluator.models import StepOutcome as Out
from tornasole.evaluator.store.transitions import JOB, event_id
from tornasole.format import paths
from tornasole.rules.actions import Action
from tornasole.stack_spec import DEFAULT_SPEC, END_MARKER_FILE, JOB_CONFIG_FILE, STOP_SIGNAL_FILE


def state(
    *rules: tuple[str, RuleStatus], status: JobStatus = JobStatus.IN_PROGRESS, **kw: object
) -> JobState:
    stop = (Action("stoptraining"),)
    return JobState(
        name="job-1",
        arn=job_arn("job-1", account="123456789012"),
        trial_path="s3://b/run",
        status=status,
        seq=3,
        rules_rev=1,
        rules=tuple(
            RuleState(
                RuleConfig(
                    n, n if n != "Stopper" else "VanishingGradient", actions=stop if n == "Stopper" else ()
                ),
                s,
            )
            for n, s in rules
        ),
        **kw,
    )


def test_first_firing_then_sticky_issues_found() -> None:
    s = state(("A", RuleStatus.IN_PROGRESS), ("B", RuleStatus.ISSUES_FOUND))
    decide = decisions.after_outcomes(
        [Out("B", 7, fired=True, details="b"), Out("A", 7, fired=True, details="a")]
    )
    change = decide(s)
    assert (change.entity, change.status, change.issue_step, change.details) == ("A", "IssuesFound", 7, "a")
    after = dataclasses.replace(s, rules=(RuleState(s.rules[0].config, RuleStatus.ISSUES_FOUND), s.rules[1]))
    assert decide(after) is None


def test_error_wins_over_issues_and_only_for_evaluating_rules() -> None:
    s = state(("A", RuleStatus.ISSUES_FOUND), ("B", RuleStatus.NO_ISSUES_FOUND))
    change = decisions.after_outcomes([Out("A", 3, error="boom"), Out("B", 3, error="x")])(s)
    assert (change.entity, change.status) == ("A", "Error")
    assert change.details.startswith("boom; before that it found issues (first at step None)")
    fresh = state(("A", RuleStatus.IN_PROGRESS))
    assert decisions.after_outcomes([Out("A", 3, error="boom")])(fresh).details == "boom"


def test_an_error_after_issues_found_keeps_what_was_found_in_its_details() -> None:
    found = RuleState(RuleConfig("A", "SimilarAcrossRuns"), RuleStatus.ISSUES_FOUND, "A: w differs", 0, 1)
    s = dataclasses.replace(state(), rules=(found,))
    change = decisions.after_outcomes([Out("A", 3, error="A: boom")])(s)
    assert (change.status, change.details) == (
        "Error",
        "A: boom; before that it found issues (first at step 1): A: w differs",
    )


def test_stoptraining_moves_the_job_to_stopping_with_a_stop_signal() -> None:
    s = state(("Stopper", RuleStatus.ISSUES_FOUND))
    change = decisions.after_outcomes([Out("Stopper", 5, fired=True)])(s)
    assert (change.entity, change.status) == (JOB, "Stopping")
    (stop,) = change.extra
    assert stop.kind == "stop"
    assert stop.payload["path"] == f"s3://b/run/{STOP_SIGNAL_FILE}"
    assert stop.payload["body"]["Step"] == 5
    assert (
        decisions.after_outcomes([Out("Stopper", 5, fired=True)])(
            dataclasses.replace(s, status=JobStatus.STOPPING)
        )
        is None
    )


def test_completion_needs_the_end_marker_and_every_step() -> None:
    s = state(("A", RuleStatus.IN_PROGRESS), ("B", RuleStatus.ISSUES_FOUND))
    counts = {"A": 3, "B": 3}
    assert decisions.completion(s, counts) is None
    assert (
        decisions.completion(
            dataclasses.replace(s, end_marker_seen=True, expected_steps=3, steps_evaluated=2), counts
        )
        is None
    )
    done = dataclasses.replace(s, end_marker_seen=True, expected_steps=3, steps_evaluated=3)
    change = decisions.completion(done, counts)
    assert (change.entity, change.status) == ("A", "NoIssuesFound")
    assert change.details == "A: no issues found in 3 evaluated steps"
    rules_done = dataclasses.replace(
        done, rules=(RuleState(done.rules[0].config, RuleStatus.NO_ISSUES_FOUND), done.rules[1])
    )
    assert decisions.completion(rules_done, counts).status == "Completed"
    assert (
        decisions.completion(dataclasses.replace(rules_done, status=JobStatus.STOPPING), counts).status
        == "Stopped"
    )
    assert decisions.completion(dataclasses.replace(rules_done, status=JobStatus.COMPLETED), counts) is None


def test_a_rule_that_evaluated_nothing_is_nothing_evaluated_not_an_error() -> None:
    """NoIssuesFound for SageMaker's six values, but its details say NothingEvaluated and what to save."""
    s = state(("A", RuleStatus.IN_PROGRESS), ("B", RuleStatus.IN_PROGRESS))
    done = dataclasses.replace(s, end_marker_seen=True, expected_steps=4, steps_evaluated=4)
    change = decisions.completion(done, {"A": 0, "B": 4})
    assert (change.entity, change.status) == ("A", "NoIssuesFound")
    assert change.details.startswith("NothingEvaluated: A evaluated 0 of 4 steps")
    assert "tornasole jobs logs" in change.details
    assert decisions.completion(done, {}).status == "NoIssuesFound"  # a rule missing from the counts is 0
    assert decisions.completion(done, {}).details.startswith("NothingEvaluated: A")


def test_a_rule_that_evaluated_nothing_because_its_steps_were_unreadable_is_an_error() -> None:
    s = state(("A", RuleStatus.IN_PROGRESS))
    done = dataclasses.replace(s, end_marker_seen=True, expected_steps=4, steps_evaluated=4)
    change = decisions.completion(done, {"A": 0}, {"A": 4})
    assert (change.entity, change.status) == ("A", "Error")
    assert change.details.startswith("A: evaluated 0 of 4 steps: 4 could not be read")


def test_stalled_uses_the_threshold_and_last_activity() -> None:
    s = state(("StalledTrainingRule", RuleStatus.IN_PROGRESS), last_activity_s=1000.0)
    s = dataclasses.replace(
        s,
        rules=(
            RuleState(
                RuleConfig("StalledTrainingRule", "StalledTrainingRule", {"threshold": "60"}),
                RuleStatus.IN_PROGRESS,
            ),
        ),
    )
    assert decisions.stalled(1059.0)(s) is None
    change = decisions.stalled(1100.0)(s)
    assert (change.status, change.details) == (
        "IssuesFound",
        "StalledTrainingRule: no new step for 100s (threshold 60s)",
    )
    assert decisions.stalled(5000.0)(dataclasses.replace(s, end_marker_seen=True)) is None


def test_event_ids_are_deterministic_per_transition() -> None:
    assert event_id("job-1", 1, JOB, "Completed") == "job-1:1:job:Completed"
    assert event_id("job-1", 2, "VG", "IssuesFound") == "job-1:2:rule/VG:IssuesFound"


def test_describe_has_the_sagemaker_fields_and_clips_details() -> None:
    s = state(
        ("A", RuleStatus.IN_PROGRESS),
        creation_ms=1700000000000,
        start_ms=1700000000001,
        last_modified_ms=1700000000002,
    )
    s = dataclasses.replace(
        s, rules=(dataclasses.replace(s.rules[0], details="x" * 5000, last_modified_ms=1700000000003),)
    )
    d = describe(s, "id-1")
    assert d["TrainingJobArn"] == "arn:aws:tornasole:us-east-1:123456789012:training-job/job-1"
    assert (d["TrainingJobStatus"], d["SecondaryStatus"]) == ("InProgress", "Training")
    assert d["DebugHookConfig"] == {"S3OutputPath": "s3://b/run", "CollectionConfigurations": []}
    assert (d["CreationTime"], d["TrainingStartTime"], d["LastModifiedTime"]) == (
        "1700000000000",
        "1700000000001",
        "1700000000002",
    )
    (st,) = d["DebugRuleEvaluationStatuses"]
    assert len(st["StatusDetails"]) == MAX_STATUS_DETAILS
    assert st["StatusDetails"].endswith("...")
    assert "TrainingEndTime" not in d
    assert d["TornasoleEventId"] == "id-1"


def test_issue_detail_points_at_the_step_files() -> None:
    s = state(("A", RuleStatus.IN_PROGRESS))
    d = issue_detail(s, "A", 1234, "TRAIN", 1100, "why", ["worker_1", "worker_0"], "e")
    assert d["S3Location"] == step_files("s3://b/run", 1234, ["worker_0", "worker_1"])
    assert d["S3Location"]["IndexFiles"][0] == "s3://b/run/" + paths.index_file_name(1234, "worker_0")
    assert d["S3Location"]["EventFiles"][1] == "s3://b/run/" + paths.event_file_name(1234, "worker_1")
    assert (d["Step"], d["Mode"], d["ModeStep"]) == (1234, "TRAIN", 1100)


def test_stack_spec_names_agree_with_the_format() -> None:
    assert (END_MARKER_FILE, STOP_SIGNAL_FILE, JOB_CONFIG_FILE) == (
        paths.END_MARKER,
        paths.STOP_SIGNAL,
        paths.JOB_CONFIG,
    )
    assert DEFAULT_SPEC.notifications.suffixes == (".json", paths.END_MARKER)
    assert DEFAULT_SPEC.table.stream_view_type == "NEW_IMAGE"
    stream_filter = json.loads(DEFAULT_SPEC.stream_filter_pattern)
    assert stream_filter["dynamodb"]["Keys"][DEFAULT_SPEC.table.sort_key] == {"S": [{"prefix": "OUTBOX#"}]}
    assert [f.asset_dir for f in DEFAULT_SPEC.functions] == [
        "functions/on_object_created",
        "functions/publish_events",
        "functions/scheduled_check",
        "functions/sagemaker_state_change",
    ]


def test_only_a_later_write_of_an_evaluated_steps_index_file_is_a_rewrite() -> None:
    # S3 re-delivers a notification with its original eventTime: the same write, or an earlier one, is not
    assert decisions.is_rewrite(1_000, 1_001)
    assert not decisions.is_rewrite(1_000, 1_000)
    assert not decisions.is_rewrite(1_000, 999)
    # unknown times are not judged: no S3 record, or a step recorded before write times were kept
    assert not decisions.is_rewrite(None, 1_001)
    assert not decisions.is_rewrite(1_000, None)


def test_a_rewritten_steps_finding_is_a_new_issue_beside_the_first() -> None:
    s = state(("Exploding", RuleStatus.IN_PROGRESS))
    first = decisions.issue_extras(s, Out("Exploding", 15, fired=True), ["worker_0"])
    again = decisions.issue_extras(s, Out("Exploding", 15, fired=True, rewrite=1_700), ["worker_0"])
    assert first[0].event_id == "job-1:1:issue/Exploding/15"
    assert again[0].event_id == "job-1:1:issue/Exploding/15@1700"

"""A job resumed from a checkpoint re-saves steps it already saved, into the same keys, while it runs.

smdebug names files by step and worker, so a spot-interrupted job that resumes from step 10 after it had
saved to step 20 overwrites steps 10..20 (FORMAT.md). Each re-saved step is written again with a later
S3 ``eventTime``; its index file is often byte for byte the same (same tensors, same shapes: same
offsets), so neither its bytes nor its ETag tell the rewrite apart, only the write does. The evaluator
must judge what is in S3 now: the rewritten step evaluated again on fresh reads (never the warm process's
cached index files or values of the old file), its finding raised, the verdicts already published kept,
the rewrite recorded and announced as after the end (``lifecycle``); and S3's at-least-once re-delivery
of the same notification must stay a no-op.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from evaluator_stack import TRIAL, Stack, load_handler

from tornasole.jobs import Rule, TornasoleJobs
from tornasole.lambda_support.handlers import on_object_created as entry

SCHEMA = json.loads((Path(__file__).parent / "events.schema.json").read_text())
STEPS = (0, 10, 15, 20)  # saved up to step 20
RESUMED = (10, 15, 20)  # the resumed run's steps: 15's loss is NaN now
REWRITTEN_KEY = "jobs/my-job/index/000000000/000000000010_worker_0.json"


def exploding() -> Rule:
    """ExplodingTensor as the recommended set configures it (a NaN loss fires)."""
    base = {"DebugRuleConfiguration": {"RuleConfigurationName": "ExplodingTensor", "RuleParameters": {}}}
    return Rule.sagemaker(base, name="ExplodingTensor", rule_parameters={"skip_scaler_overflow": "True"})


def first_run(stack: Stack) -> list[dict[str, Any]]:
    """Steps 0..20 saved and evaluated, no issue; the notifications delivered (returned)."""
    TornasoleJobs().register_job("my-job", TRIAL, [exploding()])
    stack.write_collections()
    for step in STEPS:
        stack.write_step(step, loss=1.0)
    notes = stack.notifications()
    for note in notes:
        stack.deliver(note)
    return notes


def resume(stack: Stack) -> list[dict[str, Any]]:
    """The resumed run re-saves steps 10..20 (same keys); step 15's loss is NaN now."""
    for step in RESUMED:
        stack.write_step(step, loss=float("nan") if step == 15 else 1.0)
    return stack.notifications()


def records(rewrites: bool = False) -> list[tuple[int, bool]]:
    """ExplodingTensor's (step, fired) records: the first evaluations, or those of rewritten steps."""
    return [
        (int(r["step"]), bool(r["fired"]))
        for r in TornasoleJobs().rule_evaluations("my-job", "ExplodingTensor")
        if (r.get("rewrite") is not None) == rewrites
    ]


def rule_status() -> str:
    (summary,) = TornasoleJobs().rule_job_summary("my-job")
    return summary["RuleEvaluationStatus"]


def issue_steps(events: list[dict[str, Any]]) -> list[int]:
    return [e["detail"]["Step"] for e in events if e["detail-type"] == "Tornasole Rule Issue Found"]


def check_rewrite_judged(stack: Stack) -> None:
    """The NaN of the rewritten step 15 caught; the first run's records kept; the rewrite recorded."""
    assert rule_status() == "IssuesFound"
    assert records() == [(s, False) for s in STEPS]  # the first run's records, kept as they were
    assert records(rewrites=True) == [(s, s == 15) for s in RESUMED]  # the new bytes judged
    rewritten = stack.describe()["TornasoleTrialRewritten"]
    assert rewritten["Key"] == REWRITTEN_KEY
    assert rewritten["Rewrites"] == len(RESUMED)
    stack.pump_stream()
    events = stack.events()
    for e in events:
        jsonschema.validate(e, SCHEMA)
    assert issue_steps(events) == [15]
    announced = [e for e in events if e["detail-type"] == "Tornasole Trial Rewritten"]
    assert len(announced) == 1
    assert announced[0]["detail"]["Step"] == 10
    assert announced[0]["detail"]["TrainingJobStatus"] == "InProgress"


def test_a_resumed_run_rewriting_steps_is_judged_on_the_new_bytes_in_a_warm_process(stack: Stack) -> None:
    """Question 1: the same warm process (index files and values of steps 10..20 cached) gets the rewrite."""
    first_run(stack)
    assert records() == [(s, False) for s in STEPS]
    stack.pump_stream()
    stack.events()
    results = [stack.deliver(note)["results"][0] for note in resume(stack)]
    assert [r["action"] for r in results] == ["evaluated"] * len(RESUMED), results
    check_rewrite_judged(stack)
    # the resumed run ends: the job completes on the steps counted once, the finding kept
    stack.write_end()
    for note in stack.notifications():
        stack.deliver(note)
    d = stack.describe()
    assert d["TrainingJobStatus"] == "Completed"
    (rule,) = d["DebugRuleEvaluationStatuses"]
    assert (rule["RuleEvaluationStatus"], rule["StatusDetails"].count("step 15")) == ("IssuesFound", 1)
    assert "while the job ran" in d["TornasoleTrialRewritten"]["StatusDetails"]
    # written again after the end: announced as such too (the first announcement does not hide it)
    stack.write_step(0, loss=1.0)
    for note in stack.notifications():
        assert stack.deliver(note)["results"][0]["reason"] == "job is Completed"
    rewritten = stack.describe()["TornasoleTrialRewritten"]
    assert rewritten["Rewrites"] == len(RESUMED) + 1
    assert "after the job was Completed" in rewritten["StatusDetails"]
    stack.pump_stream()
    announced = [e["detail"] for e in stack.events() if e["detail-type"] == "Tornasole Trial Rewritten"]
    assert [(a["TrainingJobStatus"], a["Step"]) for a in announced] == [("Completed", 0)]


def test_a_resumed_run_rewriting_steps_is_judged_in_a_cold_process(stack: Stack) -> None:
    """Question 2: a cold process (no cache) gets the rewrite: skipped as a duplicate, or judged?"""
    first_run(stack)
    stack.pump_stream()
    stack.events()
    stack.on_object = load_handler("on_object_created")  # a cold start: caches empty
    results = [stack.deliver(note)["results"][0] for note in resume(stack)]
    assert [r["action"] for r in results] == ["evaluated"] * len(RESUMED), results
    check_rewrite_judged(stack)


def test_redelivered_notifications_stay_a_no_op_before_and_after_a_rewrite(stack: Stack) -> None:
    """Question 3: S3 delivers at least once: the same records again (same eventTime) change nothing."""
    first_notes = first_run(stack)
    for note in first_notes:  # the first run's notifications again: duplicates
        assert stack.deliver(note)["results"][0]["action"] in (
            "duplicate",
            "num_workers",
            "registered",
            "ignored",
        )
    assert records() == [(s, False) for s in STEPS]
    assert "TornasoleTrialRewritten" not in stack.describe()
    stack.pump_stream()
    stack.events()
    resumed_notes = resume(stack)
    for note in resumed_notes:
        stack.deliver(note)
    before = (records(), records(rewrites=True), stack.describe()["TornasoleTrialRewritten"]["Rewrites"])
    for note in first_notes + resumed_notes:  # late re-deliveries of both runs' writes, in any order
        result = stack.deliver(note)["results"][0]
        assert result["action"] != "evaluated", result
    assert (
        records(),
        records(rewrites=True),
        stack.describe()["TornasoleTrialRewritten"]["Rewrites"],
    ) == before
    stack.pump_stream()
    events = stack.events()
    assert issue_steps(events) == [15]  # the rewrite's finding, once
    assert len([e for e in events if e["detail-type"] == "Tornasole Trial Rewritten"]) == 1


def test_a_warm_process_that_did_not_see_the_rewrite_reads_the_new_bytes_at_a_later_step(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two warm processes: A evaluated steps 0..30 (their index files and values cached); B gets the
    rewrite of step 30 (a resumed run, now at a lower loss); A then gets step 40, whose LossNotDecreasing
    compares with step 30. Read from A's cache, step 30's old loss (1.0) makes 0.5 a decrease; read from
    S3, its new loss (0.1) makes 0.5 a rise, and the rule fires."""
    base = {"DebugRuleConfiguration": {"RuleConfigurationName": "LossNotDecreasing", "RuleParameters": {}}}
    rule = Rule.sagemaker(base, name="LossNotDecreasing", rule_parameters={"num_steps": "10"})
    TornasoleJobs().register_job("my-job", TRIAL, [rule])
    stack.write_collections()
    for step, loss in ((0, 4.0), (10, 3.0), (20, 2.0), (30, 1.0)):
        stack.write_step(step, loss=loss)
    for note in stack.notifications():
        stack.deliver(note)
    process_a = entry.evaluator()  # the warm process that evaluated the first run
    entry.evaluator.cache_clear()  # the next delivery goes to another warm process, B
    stack.write_step(30, loss=0.1)  # the resumed run re-saves step 30
    (rewrite,) = stack.notifications()
    assert stack.deliver(rewrite)["results"][0]["action"] == "evaluated"
    monkeypatch.setattr(entry, "evaluator", lambda: process_a)  # A never saw the rewrite
    stack.write_step(40, loss=0.5)
    (later,) = stack.notifications()
    assert stack.deliver(later)["results"][0]["action"] == "evaluated"
    fired = {
        int(r["step"]): bool(r["fired"])
        for r in TornasoleJobs().rule_evaluations("my-job", "LossNotDecreasing")
        if r.get("rewrite") is None
    }
    assert fired == {0: False, 10: False, 20: False, 30: False, 40: True}, fired

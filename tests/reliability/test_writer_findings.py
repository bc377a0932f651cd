"""Issue #34, part 2: what a data writer can do to the evaluator, each finding on the real handlers.

A data writer (whoever can put objects under a trial) controls the job file
(``tornasole_job.json``), the collections file, the index and event files. Each
test here is one finding of the red-team run, asserting the end state that
shows the writer reached no further than its own trial and that nothing it
typed ran unbounded.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from reliability_rig import BUCKET, SCOREBOARD, Rig, trial

from tornasole.jobs import TornasoleJobs

TIME_LIMIT_S = 30.0
VG = {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"threshold": "0.001"}}


def job_file(rig: Rig, folder: str, config: dict[str, Any]) -> dict[str, Any]:
    """Upload a job file under ``jobs/<folder>`` and deliver its notification; the handler's result."""
    rig.put(f"jobs/{folder}/tornasole_job.json", json.dumps(config).encode())
    (note,) = rig.notes()
    start = time.monotonic()
    result = rig.deliver(note)
    assert time.monotonic() - start < TIME_LIMIT_S
    return result


def test_n2_a_job_file_cannot_compare_with_another_jobs_trial(rig: Rig) -> None:
    """N2: ``other_trial_0`` naming the victim's trial made the evaluator read it with its own role."""
    SCOREBOARD.add(hostile=1)
    rig.register("victim")
    rig.write_step("victim", 0, grad=0.123)
    rig.notes()
    similar = {
        "RuleConfigurationName": "SimilarAcrossRuns",
        "RuleParameters": {"other_trial_0": trial("victim"), "tensor_regex": "gradients/.*"},
    }
    result = job_file(rig, "attacker", {"TrainingJobName": "attacker", "DebugRuleConfigurations": [similar]})
    assert (result["kind"], result["action"]) == ("job_config", "invalid")
    assert "only compare with trials under its own" in result["reason"]
    assert trial("victim") in result["reason"]
    assert TornasoleJobs().describe("attacker")["TrainingJobStatus"] == "Failed"


@pytest.mark.parametrize(
    "other",
    [f"s3://{BUCKET}/jobs/attacker-2", f"s3://{BUCKET}/jobs/attacker/../victim"],
)
def test_n2_lookalike_and_dot_dot_paths_are_outside_the_trial(rig: Rig, other: str) -> None:
    SCOREBOARD.add(hostile=1)
    similar = {"RuleConfigurationName": "SimilarAcrossRuns", "RuleParameters": {"other_trial_0": other}}
    result = job_file(rig, "attacker", {"TrainingJobName": "attacker", "DebugRuleConfigurations": [similar]})
    assert result["action"] == "invalid"
    assert "only compare with trials under its own" in result["reason"]


def test_n2_a_job_file_may_compare_with_a_trial_inside_its_own(rig: Rig) -> None:
    similar = {
        "RuleConfigurationName": "SimilarAcrossRuns",
        "RuleParameters": {"other_trial_0": f"{trial('mine')}/baseline"},
    }
    result = job_file(rig, "mine", {"TrainingJobName": "mine", "DebugRuleConfigurations": [similar]})
    assert result["action"] == "registered", result


def test_n4_a_job_file_cannot_squat_another_name(rig: Rig) -> None:
    """N4: a job file anywhere could claim ``prod-training-42``; its owner then got JobConflictError."""
    SCOREBOARD.add(hostile=1)
    result = job_file(
        rig, "attacker", {"TrainingJobName": "prod-training-42", "DebugRuleConfigurations": [VG]}
    )
    assert (result["kind"], result["action"]) == ("job_config", "invalid")
    assert "may only register a job named 'attacker'" in result["reason"]
    rig.pump()
    assert not [e for e in rig.events() if e["detail"].get("TrainingJobName") == "prod-training-42"]
    listed = {row["name"] for row in TornasoleJobs().list_jobs()}
    assert "prod-training-42" not in listed  # the failure is the trial's, not recorded under that name
    rig.register("prod-training-42")  # the owner registers it without a conflict
    assert TornasoleJobs().describe("prod-training-42")["TrainingJobStatus"] == "InProgress"


def test_n4_a_sagemaker_layout_binds_the_name_of_its_folder(rig: Rig) -> None:
    config = {
        "TrainingJobName": "sm-job",
        "S3OutputPath": f"s3://{BUCKET}/jobs",
        "DebugRuleConfigurations": [VG],
    }
    rig.put("jobs/sm-job/debug-output/tornasole_job.json", json.dumps(config).encode())
    (note,) = rig.notes()
    assert rig.deliver(note)["action"] == "registered"


REDOS = "(a|a)+$"


def test_n3_a_job_files_catastrophic_tensor_regex_is_refused_at_registration(rig: Rig) -> None:
    """N3: ``tensor_regex`` ``(a|a)+$`` met a writer-chosen tensor name and held the GIL for minutes."""
    SCOREBOARD.add(hostile=1)
    rule = {"RuleConfigurationName": "LossNotDecreasing", "RuleParameters": {"tensor_regex": REDOS}}
    result = job_file(rig, "redos", {"TrainingJobName": "redos", "DebugRuleConfigurations": [rule]})
    assert result["action"] == "invalid"
    assert "tensor_regex" in result["reason"]
    assert "exponential" in result["reason"]


def test_n3_a_collections_files_catastrophic_include_regex_is_refused(rig: Rig) -> None:
    SCOREBOARD.add(hostile=1)
    rig.register("redos")
    colls = {
        "collections": {"losses": {"name": "losses", "include_regex": [REDOS]}},
        "_meta": {"num_workers": 1},
    }
    rig.put("jobs/redos/collections/000000000/worker_0_collections.json", json.dumps(colls).encode())
    rig.write_step("redos", 0, extra={"a" * 40 + "!": 1.0})
    start = time.monotonic()
    results = rig.deliver_all()
    assert time.monotonic() - start < TIME_LIMIT_S
    (colls_result,) = [r for r in results if r["kind"] == "collections"]
    assert colls_result["action"] == "invalid"
    assert "include_regex" in colls_result["reason"]
    assert "exponential" in colls_result["reason"]


def test_n3_tensor_names_are_capped_when_an_index_is_read() -> None:
    from tornasole.exceptions import IndexReaderException
    from tornasole.format.index import MAX_TENSOR_NAME_LENGTH, decode_index

    doc = {
        "meta": {"mode": "TRAIN", "mode_step": 1, "event_file_name": "events/x.tfevents"},
        "tensor_payload": [{"tensorname": "a" * (MAX_TENSOR_NAME_LENGTH + 1), "start_idx": 0, "length": 80}],
    }
    with pytest.raises(IndexReaderException, match="tensor name of 513 characters; the limit is 512"):
        decode_index(json.dumps(doc).encode(), "i.json")


BAD_WORKERS = {
    "zero": {"num_workers": 0},
    "negative": {"num_workers": -3},
    "a billion": {"num_workers": 10**9},
    "1e9": {"num_workers": 1e9},
    "text": {"num_workers": "two"},
}
BAD_COLLECTIONS_FILES = {
    **{
        f"num_workers {k}": json.dumps({"collections": {}, "_meta": v}).encode()
        for k, v in BAD_WORKERS.items()
    },
    "bad bytes": b"\xff\xfe\x00garbage",
    "100k-deep JSON": b'{"collections": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
}


@pytest.mark.parametrize("name", sorted(BAD_COLLECTIONS_FILES))
def test_n6_a_malformed_collections_file_settles_its_job_with_a_reason(rig: Rig, name: str) -> None:
    """N6: every later index notification raised, and the job stayed InProgress forever."""
    SCOREBOARD.add(hostile=1)
    rig.register("wedged")
    rig.put("jobs/wedged/collections/000000000/worker_0_collections.json", BAD_COLLECTIONS_FILES[name])
    rig.write_step("wedged", 0)
    rig.write_step("wedged", 1, grad=1e-9)
    rig.write_end("wedged")
    start = time.monotonic()
    results = rig.deliver_all()  # nothing escapes to Lambda's retries
    assert time.monotonic() - start < TIME_LIMIT_S
    assert [r for r in results if r["kind"] == "collections"][0]["action"] == "invalid"
    rig.settle("wedged")
    described = TornasoleJobs().describe("wedged")
    assert described["TrainingJobStatus"] != "InProgress", described
    statuses = rig.statuses("wedged")
    assert statuses["VanishingGradient"][0] == "Error", statuses
    assert "worker_0_collections.json" in statuses["VanishingGradient"][1]
    report = rig.evaluator(clock_offset=6 * 3600).scheduled_check()
    assert not report.errors


FLAKY_RULE = (
    "from smdebug.rules import Rule\n\nclass Flaky(Rule):\n    def __init__(self, base_trial):\n"
    "        super().__init__(base_trial)\n\n    def invoke_at_step(self, step):\n"
    "        raise ConnectionError('connection reset by peer')\n"
)


def test_n5_a_custom_rules_transient_error_costs_only_that_rule(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """N5: one custom rule's ConnectionError discarded the step for every rule of the job."""
    from reliability_rig import RULES_PREFIX

    from tornasole.evaluator import runner
    from tornasole.jobs import Rule

    SCOREBOARD.add(hostile=1)
    monkeypatch.setattr(runner, "CUSTOM_RULE_BACKOFF_S", 0.0, raising=False)
    rig.put("rules/flaky.py", FLAKY_RULE.encode())
    flaky = Rule.custom(
        name="Flaky",
        image_uri="tornasole",
        instance_type="ml.t3.medium",
        volume_size_in_gb=1,
        source=f"{RULES_PREFIX}flaky.py",
        rule_to_invoke="Flaky",
        rule_parameters={},
    )
    rig.register("flaky", [VG, flaky])
    rig.write_collections("flaky")
    rig.write_step("flaky", 0)
    rig.write_step("flaky", 1, grad=1e-9)
    rig.write_end("flaky")
    rig.deliver_all()
    rig.settle("flaky")
    statuses = rig.statuses("flaky")
    assert statuses["VanishingGradient"][0] == "IssuesFound", statuses
    assert rig.records("flaky")[1]["fired"]
    flaky_records = rig.records("flaky", "Flaky")
    assert "given up after 3 tries with a transient error" in flaky_records[1]["step_error"]
    assert "ConnectionError: connection reset by peer" in flaky_records[1]["step_error"]
    rig.tally("flaky", [0, 1], rules=("VanishingGradient", "Flaky"))


def test_n13_a_final_status_says_how_many_steps_were_unreadable(rig: Rig) -> None:
    """N13: a rule ended NoIssuesFound with nothing saying it could not read some of the steps."""
    from tornasole.format.paths import index_file_name

    SCOREBOARD.add(hostile=1)
    rig.register("partial")
    rig.write_collections("partial")
    for step in (0, 2, 3):
        rig.write_step("partial", step)
    rig.put(f"jobs/partial/{index_file_name(1, 'worker_0')}", b'{"meta": {"mode": "TRAIN"')  # truncated
    rig.write_end("partial")
    rig.deliver_all()
    rig.settle("partial")
    status, details = rig.statuses("partial")["VanishingGradient"]
    assert status == "NoIssuesFound"
    assert details == (
        "VanishingGradient: no issues found in 3 evaluated steps; 1 step unreadable, incomplete or given up "
        "(`tornasole jobs status partial`)"
    )
    rig.tally("partial", [0, 1, 2, 3])


def test_n9_a_publisher_stopped_after_put_events_sends_again_and_the_docs_say_so(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """N9: EVENTS.md said "exactly once"; a publisher killed between PutEvents and its mark delivers
    the event twice, with the same ``TornasoleEventId``: at least once, deduplicated by that id."""
    from pathlib import Path

    from tornasole.evaluator.store.outbox import OutboxPublisher

    original = OutboxPublisher._put_event
    killed: list[str] = []

    def put_then_die(self: Any, payload: dict[str, Any]) -> None:
        original(self, payload)
        if not killed:  # the first delivery: sent, then the publisher dies before marking it
            killed.append(payload["detail"]["TornasoleEventId"])
            raise SystemExit("killed between PutEvents and the published mark")

    monkeypatch.setattr(OutboxPublisher, "_put_event", put_then_die)
    rig.register("twice")
    with pytest.raises(SystemExit):
        rig.pump()
    rig._last_seq.clear()  # the stream hands the batch again, as Lambda's event source mapping does
    rig.pump()
    ids = [e["detail"]["TornasoleEventId"] for e in rig.events() if e["detail"]["TrainingJobName"] == "twice"]
    assert ids.count(killed[0]) == 2
    docs = " ".join((Path(__file__).resolve().parents[2] / "docs" / "EVENTS.md").read_text().split())
    assert "exactly once" not in docs
    assert "at least once; deduplicate by `detail.TornasoleEventId`" in docs


def test_n5_built_in_outcomes_are_recorded_before_a_custom_rule_runs(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """N5: the invocation dying in a custom rule (its Lambda's timeout) lost the built-ins' findings."""
    from reliability_rig import RULES_PREFIX

    from tornasole.evaluator.runner import StepRunner
    from tornasole.jobs import Rule

    SCOREBOARD.add(hostile=1)
    run = StepRunner.run

    def dies_in_custom_rules(self: Any, job: str, trial_path: str, files: Any, rules: Any, *a: Any) -> Any:
        if any(r.source_s3_uri for r in rules) and files.step == 1:
            raise SystemExit("the invocation timed out in a custom rule")
        return run(self, job, trial_path, files, rules, *a)

    monkeypatch.setattr(StepRunner, "run", dies_in_custom_rules)
    rig.put(
        "rules/ok.py",
        FLAKY_RULE.replace("raise ConnectionError('connection reset by peer')", "return False").encode(),
    )
    ok = Rule.custom(
        name="Ok",
        image_uri="tornasole",
        instance_type="ml.t3.medium",
        volume_size_in_gb=1,
        source=f"{RULES_PREFIX}ok.py",
        rule_to_invoke="Flaky",
        rule_parameters={},
    )
    rig.register("dies", [VG, ok])
    rig.write_collections("dies")
    rig.write_step("dies", 1, grad=1e-9)
    with pytest.raises(SystemExit):
        rig.deliver_all()
    assert rig.records("dies")[1]["fired"]  # VanishingGradient's finding was recorded first
    assert rig.statuses("dies")["VanishingGradient"][0] == "IssuesFound"
    assert 1 not in rig.records("dies", "Ok")


@pytest.mark.parametrize("key", ["other_trials_paths", "other-trials-paths", "other-trial", "other_trials"])
def test_n2_every_spelling_of_other_trials_is_checked(rig: Rig, key: str) -> None:
    """The rules also open other trials named ``other_trials_paths`` or ``other-trials-paths``."""
    SCOREBOARD.add(hostile=1)
    similar = {"RuleConfigurationName": "SimilarAcrossRuns", "RuleParameters": {key: trial("victim")}}
    result = job_file(rig, "attacker", {"TrainingJobName": "attacker", "DebugRuleConfigurations": [similar]})
    assert result["action"] == "invalid"
    assert "only compare with trials under its own" in result["reason"]

"""A whole run's notifications, delivered in order, shuffled, duplicated and concurrently.

Every delivery mode must give the same final state and the same set of events,
each transition exactly once (EVENTS.md), captured through the bus's SQS target
and validated against the JSON schema of EVENTS.md kept next to this file.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import unquote_plus

import jsonschema
import pytest
from evaluator_stack import Stack, event_ids
from moto.core.botocore_stubber import BotocoreStubber

from tornasole.evaluator.service import Evaluator
from tornasole.evaluator.store.state_table import StateTable
from tornasole.jobs import TornasoleJobs
from tornasole.lambda_support.env import HandlerEnv

SCHEMA = json.loads((Path(__file__).parent / "events.schema.json").read_text())
JOB_CONFIG = {
    "TrainingJobName": "my-job",
    "DebugRuleConfigurations": [
        {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"threshold": "0.001"}},
        {
            "RuleConfigurationName": "StrictVanishing",
            "RuleParameters": {"rule_to_invoke": "VanishingGradient", "threshold": "1e-30"},
        },
        {"RuleConfigurationName": "ExplodingTensor", "RuleParameters": {"rule_to_invoke": "ExplodingTensor"}},
    ],
}
STEPS = [0, 5, 10, 15, 20]
GRADS = {5: 1e-6, 15: 1e-6, 10: float("nan")}
EXPECTED_EVENTS = {
    "my-job:1:job:InProgress",
    "my-job:1:issue/VanishingGradient/5",
    "my-job:1:issue/VanishingGradient/15",
    "my-job:1:rule/VanishingGradient:IssuesFound",
    "my-job:1:issue/ExplodingTensor/10",
    "my-job:1:rule/ExplodingTensor:IssuesFound",
    "my-job:1:rule/StrictVanishing:NoIssuesFound",
    "my-job:1:job:Completed",
}


def write_run(stack: Stack) -> list[dict[str, Any]]:
    """Config, collections, 5 steps, end marker: the notifications, in write order."""
    stack.put_job_config(JOB_CONFIG)
    stack.write_collections()
    for step in STEPS:
        stack.write_step(step, grad=GRADS.get(step, 1.0))
    stack.write_end()
    return stack.notifications()


def final_state(stack: Stack) -> dict[str, Any]:
    """Describe without times, plus every (rule, step) evaluation record."""
    d = stack.describe()
    statuses = {
        s["RuleConfigurationName"]: (s["RuleEvaluationStatus"], s["StatusDetails"])
        for s in d["DebugRuleEvaluationStatuses"]
    }
    jobs = TornasoleJobs()
    records = {
        name: [(r["step"], r["fired"], r.get("error")) for r in jobs.rule_evaluations("my-job", name)]
        for name in statuses
    }
    return {"status": d["TrainingJobStatus"], "rules": statuses, "records": records}


def check_events(stack: Stack) -> None:
    stack.pump_stream()
    events = stack.events()
    for e in events:
        jsonschema.validate(e, SCHEMA)
    ids = event_ids(events)
    assert Counter(ids).most_common(1)[0][1] == 1, f"an event was emitted twice: {Counter(ids)}"
    assert set(ids) == EXPECTED_EVENTS
    completed = next(e for e in events if e["detail"]["TornasoleEventId"] == "my-job:1:job:Completed")
    assert [s["RuleEvaluationStatus"] for s in completed["detail"]["DebugRuleEvaluationStatuses"]] == [
        "IssuesFound",
        "NoIssuesFound",
        "IssuesFound",
    ]


def check_state(stack: Stack) -> None:
    state = final_state(stack)
    assert state["status"] == "Completed"
    assert state["rules"]["VanishingGradient"][0] == "IssuesFound"
    # the earliest firing step is reported, whatever the arrival order
    assert "step 5 " in state["rules"]["VanishingGradient"][1]
    assert state["rules"]["ExplodingTensor"][0] == "IssuesFound"
    assert state["rules"]["StrictVanishing"] == (
        "NoIssuesFound",
        "StrictVanishing: no issues found in 5 evaluated steps",
    )
    assert state["records"]["VanishingGradient"] == [(s, s in (5, 15), None) for s in STEPS]
    assert state["records"]["StrictVanishing"] == [(s, False, None) for s in STEPS]
    assert [s for s, fired, _ in state["records"]["ExplodingTensor"] if fired] == [10]


@pytest.mark.parametrize("mode", ["in_order", "shuffled", "duplicated_x3", "reversed"])
def test_delivery_order_and_duplicates_do_not_change_state_or_events(stack: Stack, mode: str) -> None:
    # GIVEN a whole run's notifications (job file, collections, 5 steps, end marker)
    notes = write_run(stack)
    rng = random.Random(7)
    if mode == "shuffled":
        rng.shuffle(notes)
    elif mode == "duplicated_x3":
        notes = notes * 3
        rng.shuffle(notes)
    elif mode == "reversed":  # end marker first, job file last
        notes.reverse()
    # WHEN the handler gets them in that order (stream pumped midway too: publishing interleaves)
    for i, note in enumerate(notes):
        stack.deliver(note)
        if i == len(notes) // 2:
            stack.pump_stream()
    # THEN the final state and the set of events are the same, each event once
    check_state(stack)
    check_events(stack)


def test_eight_concurrent_threads_converge(stack: Stack) -> None:
    notes = write_run(stack) * 2
    random.Random(3).shuffle(notes)
    config_note = next(
        n for n in notes if n["Records"][0]["s3"]["object"]["key"].endswith("tornasole_job.json")
    )
    evaluator = Evaluator.from_env(HandlerEnv.from_environ())

    def deliver(note: dict[str, Any]) -> str:
        rec = note["Records"][0]["s3"]
        return evaluator.handle_object_created(
            rec["bucket"]["name"], unquote_plus(rec["object"]["key"])
        ).action

    deliver(config_note)  # registration first so the race is about steps, completion and transitions
    # moto's in-process backends are not thread-safe: serialise each API call (as a real service would
    # apply it atomically) while our read-decide-commit sequences still interleave between calls.
    lock = threading.Lock()
    original = BotocoreStubber.__call__

    def one_call_at_a_time(self: BotocoreStubber, *args: Any, **kwargs: Any) -> Any:
        with lock:
            return original(self, *args, **kwargs)

    with mock.patch.object(BotocoreStubber, "__call__", one_call_at_a_time), ThreadPoolExecutor(8) as pool:
        actions = list(pool.map(deliver, notes))
    assert actions.count("evaluated") >= len(STEPS)
    check_state(stack)
    check_events(stack)
    assert StateTable().query("PENDING", "", index=True) == []


def test_collections_file_handled_while_a_step_looks_for_it_does_not_strand_the_step(stack: Stack) -> None:
    """Two workers of ``on_object_created``: the step's handler lists the trial's collections (none yet),
    then the collections file lands and its handler re-drives the pending steps, all before the step's
    handler puts its step on the PENDING index. The step must still be evaluated now, not stranded
    until the scheduled check's grace period (minutes) re-drives it."""
    from tornasole.evaluator.store.step_store import StepStore

    stack.put_job_config(JOB_CONFIG)
    stack.deliver(stack.notifications()[0])
    stack.write_step(0)
    (index_note,) = stack.notifications()
    original = StepStore.mark_pending
    interleaved: list[str] = []

    def collections_meanwhile(self: StepStore, job: str, step: int, now_ms: int) -> None:
        if not interleaved:  # the other worker's whole invocation, between the listing and the marking
            stack.write_collections()
            (collections_note,) = stack.notifications()
            interleaved.append(stack.deliver(collections_note)["results"][0]["action"])
        original(self, job, step, now_ms)

    with mock.patch.object(StepStore, "mark_pending", collections_meanwhile):
        result = stack.deliver(index_note)
    assert interleaved == ["num_workers"]
    assert result["results"][0]["action"] == "evaluated", result
    assert [r[0] for r in final_state(stack)["records"]["VanishingGradient"]] == [0]
    assert StateTable().query("PENDING", "", index=True) == []

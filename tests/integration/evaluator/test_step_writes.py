"""What one evaluated step writes: a healthy step is one transaction, and completion still comes.

A step whose rules find nothing writes its evaluation records and its count in one transaction, under
the condition that the job's end marker is not seen (then the job cannot complete at this step and is
not re-read). Once the end marker is seen, steps go the usual way and the last one completes the job.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator
from typing import Any

import pytest
from evaluator_stack import TRIAL, Stack

from tornasole.aws.clients import client
from tornasole.evaluator.store.keys import META, job_pk
from tornasole.evaluator.store.state_table import StateTable
from tornasole.evaluator.store.step_store import StepStore
from tornasole.jobs import TornasoleJobs, rule_job_summary
from tornasole.lambda_support.env import HandlerEnv

VG = {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"threshold": "0.001"}}


@pytest.fixture
def calls(stack: Stack) -> Iterator[collections.Counter]:
    """DynamoDB operations made by this process's clients, by name."""
    counted: collections.Counter = collections.Counter()

    def count(model: Any, **_: Any) -> None:
        counted[model.name] += 1

    events = client("dynamodb").meta.events
    events.register("before-call.dynamodb", count)
    yield counted
    events.unregister("before-call.dynamodb", count)


def test_a_healthy_step_is_one_transaction_and_no_job_re_read(stack: Stack, calls) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    stack.write_collections()
    stack.write_step(0)
    [stack.deliver(n) for n in stack.notifications()]  # the first step moves the rule to InProgress
    calls.clear()
    stack.write_step(1)
    [note] = stack.notifications()
    assert stack.deliver(note)["results"][0]["action"] == "evaluated"
    assert calls["TransactWriteItems"] == 1
    assert calls["Query"] == 1  # the job read before the step; none after it

    stack.write_step(2)
    stack.write_end()
    results = [stack.deliver(n)["results"][0] for n in stack.notifications()]
    assert [r["action"] for r in results] == ["evaluated", "completed"]
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    statuses = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in rule_job_summary("my-job")}
    assert statuses == {"VanishingGradient": "NoIssuesFound"}
    steps = [r["step"] for r in TornasoleJobs().rule_evaluations("my-job", "VanishingGradient")]
    assert steps == [0, 1, 2]


def test_a_step_counted_after_the_end_marker_completes_the_job(stack: Stack) -> None:
    """The end marker's handler ran (and found step 1 unevaluated) before step 1 was counted."""
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    stack.write_collections()
    stack.write_step(0)
    stack.write_step(1)
    notes = stack.notifications()
    stack.deliver(notes[0])  # the collections file
    stack.deliver(notes[1])  # step 0
    stack.write_end()
    [end] = stack.notifications()
    assert stack.deliver(end)["results"][0]["action"] == "end_seen"  # step 1 not evaluated yet
    assert stack.describe()["TrainingJobStatus"] == "InProgress"
    assert stack.deliver(notes[2])["results"][0]["action"] == "evaluated"
    assert stack.describe()["TrainingJobStatus"] == "Completed"


def test_counting_before_the_end_says_why_it_wrote_nothing(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    stack.write_collections()
    stack.write_step(0)
    stack.write_step(1)
    stack.write_step(2)
    table = StateTable(HandlerEnv.from_environ().state_table)
    steps = StepStore(table)
    for step in (0, 1, 2):
        steps.record_worker("my-job", step, "worker_0", time.time())
    assert steps.mark_evaluated_before_end("my-job", 0, 1) is True
    assert steps.mark_evaluated_before_end("my-job", 0, 2) is False  # counted before
    steps.set_end_marker("my-job", 3, time.time())
    assert steps.mark_evaluated_before_end("my-job", 1, 3) is None  # nothing written: the caller's turn
    assert steps.record_and_mark_before_end("my-job", [], 2, 4) is False
    assert int(table.get(job_pk("my-job"), META)["steps_evaluated"]) == 1
    assert steps.step("my-job", 1).evaluated is False
    assert steps.mark_evaluated("my-job", 1, 5) is True
    assert int(table.get(job_pk("my-job"), META)["steps_evaluated"]) == 2

"""Cost per step does not grow with the run: no listing, the same requests at step 2 and step 12."""

from __future__ import annotations

from collections import Counter
from typing import Any

from evaluator_stack import TRIAL, Stack

from tornasole.aws.clients import client
from tornasole.jobs import TornasoleJobs


def count_requests() -> tuple[Counter, Any]:
    calls: Counter = Counter()

    def record(event_name: str, **_: Any) -> None:
        calls[event_name.split(".", 1)[1]] += 1  # "s3.GetObject", "dynamodb.Query", ...

    for service in ("s3", "dynamodb"):
        client(service).meta.events.register(f"before-call.{service}", record)
    return calls, record


def test_requests_per_step_are_independent_of_run_length(stack: Stack) -> None:
    TornasoleJobs().register_job(
        "my-job",
        TRIAL,
        [{"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"threshold": "0.001"}}],
    )
    stack.write_collections()
    steps = list(range(13))
    for step in steps:
        stack.write_step(step)
    notes = stack.notifications()
    calls, _ = count_requests()
    per_step = {}
    for note in notes:
        calls.clear()
        result = stack.deliver(note)["results"][0]
        if result["kind"] == "index":
            assert result["action"] == "evaluated"
            per_step[result["step"]] = dict(calls)
    assert not any("List" in op for counts in per_step.values() for op in counts)  # never lists the run
    assert per_step[2] == per_step[12]
    assert per_step[12]["s3.GetObject"] <= 4  # index + collections + event data (ranged reads)
    assert "dynamodb.GetItem" not in per_step[12]  # the trial's job is remembered by the warm evaluator

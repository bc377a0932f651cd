"""Cost per step does not grow with the run: no listing, the same requests at step 2 and step 12."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from evaluator_stack import TRIAL, Stack

from tornasole.aws.clients import client
from tornasole.format.writer import StepWriter
from tornasole.jobs import TornasoleJobs
from tornasole.modes import ModeKeys


def count_requests() -> tuple[Counter, Any]:
    calls: Counter = Counter()

    def record(event_name: str, **_: Any) -> None:
        calls[event_name.split(".", 1)[1]] += 1  # "s3.GetObject", "dynamodb.Query", ...

    for service in ("s3", "dynamodb"):
        client(service).meta.events.register(f"before-call.{service}", record)
    return calls, record


def write_step_with_relu(stack: Stack, step: int) -> None:
    """``Stack.write_step``'s gradient and loss plus one ReLU output of one sample (a 1-D tensor)."""
    sw = StepWriter(step, "worker_0", mode=ModeKeys.TRAIN, mode_step=step)
    sw.add_tensor("gradients/fc.weight", np.full((4, 4), 1.0, dtype=np.float32), wall_time=1.0)
    sw.add_tensor("fc_relu_output", np.linspace(0.0, 1.0, 8, dtype=np.float32), wall_time=1.0)
    sw.add_tensor("loss", np.float32(1.0 / (step + 1)), wall_time=1.0)
    stack.writer().write_step(sw)


def test_requests_per_step_are_independent_of_run_length(stack: Stack) -> None:
    """Rules that read earlier steps included: LossNotDecreasing compares with an earlier loss, DeadRelu
    pools one-sample ReLU outputs back over up to ``min_samples`` (32) steps. Earlier index files, the
    collections file and values decoded at earlier steps are the warm evaluator's (they never change once
    written), so a step reads only its own index file and its own event file."""
    rules = ("VanishingGradient", "LossNotDecreasing", "DeadRelu")
    TornasoleJobs().register_job(
        "my-job",
        TRIAL,
        [{"RuleConfigurationName": r, "RuleParameters": {"rule_to_invoke": r}} for r in rules],
    )
    stack.write_collections()
    steps = list(range(13))
    for step in steps:
        write_step_with_relu(stack, step)
    notes = stack.notifications()
    calls, _ = count_requests()
    per_step = {}
    for note in notes:
        calls.clear()
        result = stack.deliver(note)["results"][0]
        if result["kind"] == "index":
            assert result["action"] == "evaluated"
            assert "Error" not in result["rules"].values(), result
            per_step[result["step"]] = dict(calls)
    assert not any("List" in op for counts in per_step.values() for op in counts)  # never lists the run
    assert per_step[2] == per_step[12]
    assert per_step[12]["s3.GetObject"] == 2  # its index file, one ranged read of its event file
    assert "dynamodb.GetItem" not in per_step[12]  # the trial's job is remembered by the warm evaluator

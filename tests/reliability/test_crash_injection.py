"""Crash injection before and after every persistence point of the evaluator.

A clean run of a small job (collections, a step that fires, end marker) is recorded
first: every DynamoDB and S3 write the ``on_object_created`` handler makes is a
persistence point. Then, for each point, a fresh job runs the same notifications
with the process "dying" (``Crash``, a ``BaseException`` nothing catches) just
before, or just after, that write. Recovery is what AWS does: the failed
notification is delivered again (Lambda's retry), the others go on, the
scheduled check runs after its grace periods and the stream is drained. The end
state must equal the clean run's: statuses, every (rule, step) record, and each
event exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from reliability_rig import Rig, note_key

from tornasole.aws.clients import client

WRITES = {
    "dynamodb": ("PutItem", "UpdateItem", "TransactWriteItems", "DeleteItem"),
    "s3": ("PutObject",),
}


class Crash(BaseException):
    """The Lambda process dying at this point (nothing in the evaluator may catch it)."""


@contextmanager
def persistence_points(on_point: Callable[[str, str], None]) -> Iterator[None]:
    """Call ``on_point(when, operation)`` around every write call of the evaluator's clients."""
    hooks = []
    for service, ops in WRITES.items():
        events = client(service).meta.events
        for op in ops:
            for when, event in (
                ("before", f"before-call.{service}.{op}"),
                ("after", f"after-call.{service}.{op}"),
            ):

                def hook(*_: Any, _when: str = when, _op: str = op, **__: Any) -> None:
                    on_point(_when, _op)

                events.register(event, hook)
                hooks.append((events, event, hook))
    try:
        yield
    finally:
        for events, event, hook in hooks:
            events.unregister(event, hook)


def write_job(rig: Rig, job: str) -> list[dict[str, Any]]:
    rig.register(job)
    rig.write_collections(job)
    rig.write_step(job, 0, grad=1e-9)
    rig.write_end(job)
    return rig.notes()


def end_state(rig: Rig, job: str) -> tuple[Any, ...]:
    records = {s: (r["fired"], r.get("error"), r.get("step_error")) for s, r in rig.records(job).items()}
    return rig.describe_status(job), rig.statuses(job), records


def run_with_crash(rig: Rig, job: str, crash_at: int | None, when: str) -> int:
    """Deliver ``job``'s notifications crashing at write number ``crash_at`` (``when`` it happens);
    returns how many write points the deliveries passed."""
    notes = write_job(rig, job)
    seen = [0]

    def on_point(moment: str, op: str) -> None:
        if moment == "before":
            seen[0] += 1
        if crash_at is not None and seen[0] == crash_at and moment == when:
            seen[0] += 10_000  # crash once
            raise Crash(f"{when} {op} #{crash_at}")

    with persistence_points(on_point):
        for note in notes:
            try:
                rig.deliver(note)
            except Crash:
                rig.deliver(note)  # Lambda retries the invocation
    return seen[0]


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_crash_at_any_persistence_point_recovers_to_the_clean_end_state(rig: Rig, when: str) -> None:
    points = run_with_crash(rig, "clean", None, when)
    rig.settle("clean")
    clean = end_state(rig, "clean")
    assert clean[0] == "Completed"
    assert clean[1]["VanishingGradient"][0] == "IssuesFound"
    clean_ids = {i.replace("clean", "JOB") for i in rig.count_duplicates(rig.events())}
    assert points >= 8
    for k in range(1, points + 1):
        job = f"crash-{when}-{k}"
        run_with_crash(rig, job, k, when)
        rig.settle(job)
        assert end_state(rig, job) == clean, f"crash {when} write #{k}"
        ids = rig.count_duplicates([e for e in rig.events() if e["detail"]["TrainingJobName"] == job])
        assert {i.replace(job, "JOB") for i in ids} == clean_ids, f"crash {when} write #{k}"
        rig.tally(job, [0])
    assert note_key  # the rig's key decoder is what the handler uses too

"""Delivery chaos: a multi-worker run's notifications duplicated up to x5, shuffled, delivered concurrently.

Default: 16 steps x 4 workers, 16 threads (the full 500-step run under
``TORNASOLE_RELIABILITY_FULL=1``). The end state must be exactly that of an
orderly delivery: the job completed, every (rule, step) record written once,
the earliest firing step reported, and every event delivered exactly once.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from reliability_rig import FULL, Rig, moto_serialised

JOB = "chaos"
STEPS = 500 if FULL else 16
WORKERS = 4
THREADS = 16
VANISHING = {7, STEPS - 3}


def expected_events() -> set[str]:
    ids = {f"{JOB}:1:job:InProgress", f"{JOB}:1:rule/VanishingGradient:IssuesFound", f"{JOB}:1:job:Completed"}
    return ids | {f"{JOB}:1:issue/VanishingGradient/{s}" for s in VANISHING}


def test_duplicated_shuffled_concurrent_deliveries_converge(rig: Rig) -> None:
    rig.register(JOB)
    workers = [f"worker_{w}" for w in range(WORKERS)]
    for w in workers:
        rig.write_collections(JOB, num_workers=WORKERS, worker=w)
    for step in range(STEPS):
        for w in workers:
            rig.write_step(JOB, step, worker=w, grad=1e-6 if step in VANISHING else 1.0)
    for _ in workers:
        rig.write_end(JOB)
    notes = rig.notes()
    rng = random.Random(11)
    chaos = [n for n in notes for _ in range(rng.randint(1, 5))]
    rng.shuffle(chaos)

    def deliver(note: dict[str, Any]) -> str:
        return rig.deliver(note)["action"]

    with moto_serialised(), ThreadPoolExecutor(THREADS) as pool:
        actions = list(pool.map(deliver, chaos))
    assert actions.count("evaluated") >= STEPS
    rig.settle()  # whatever a race left pending, as the scheduled check would
    assert rig.evaluator().steps.pending() == []
    d = rig.describe_status(JOB)
    assert d == "Completed"
    status, details = rig.statuses(JOB)["VanishingGradient"]
    assert status == "IssuesFound"
    assert f"step {min(VANISHING)} " in details  # the earliest firing step, whatever the arrival order
    records = rig.records(JOB)
    assert [s for s, r in sorted(records.items()) if r["fired"]] == sorted(VANISHING)
    rig.tally(JOB, list(range(STEPS)))
    ids = rig.count_duplicates(rig.events())
    assert set(ids) == expected_events()

"""Load (many concurrent jobs) and long life (many steps in one warm process).

Default sizes keep the normal test run short (4 jobs x 2 workers x 10 steps;
80 steps in one process); ``TORNASOLE_RELIABILITY_FULL=1`` (``make reliability``)
runs 50 jobs x 4 workers x 200 steps and 10,000 steps.

Flat per-step time is measured on the evaluator's side: moto deep-copies the
whole table on every transaction (AWS does nothing of the kind), so moto's own
processing time grows with the table and is subtracted; the number of AWS calls
per step must not grow either. Memory is what the evaluator's own code still
holds allocated after the last quarter of the run (``tracemalloc`` filtered to
Tornasole's files): the process's resident size also holds moto's table and the
deep copies moto keeps, which say nothing about the evaluator.
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from unittest import mock

from moto.core.botocore_stubber import BotocoreStubber
from reliability_rig import FULL, Rig, moto_serialised, note_key

import tornasole

JOBS, WORKERS, STEPS = (50, 4, 200) if FULL else (4, 2, 10)
SOAK_STEPS = 10_000 if FULL else 60


def test_concurrent_jobs_all_complete_with_every_step_evaluated(rig: Rig) -> None:
    jobs = [f"load-{j}" for j in range(JOBS)]
    workers = [f"worker_{w}" for w in range(WORKERS)]
    fire = {job: 3 + j % (STEPS - 3) for j, job in enumerate(jobs)}
    for job in jobs:
        rig.register(job)
        for w in workers:
            rig.write_collections(job, num_workers=WORKERS, worker=w)
        for step in range(STEPS):
            for w in workers:
                rig.write_step(job, step, worker=w, grad=1e-9 if step == fire[job] else 1.0)
        for _ in workers:
            rig.write_end(job)
    notes = rig.notes()
    random.Random(5).shuffle(notes)
    with moto_serialised(), ThreadPoolExecutor(8) as pool:
        list(pool.map(rig.deliver, notes))
    rig.settle()
    ids = rig.count_duplicates(rig.events())
    for job in jobs:
        assert rig.describe_status(job) == "Completed", job
        status, details = rig.statuses(job)["VanishingGradient"]
        assert status == "IssuesFound"
        assert f"step {fire[job]} " in details
        rig.tally(job, list(range(STEPS)))
        assert f"{job}:1:job:Completed" in ids


def test_a_warm_process_keeps_memory_and_time_per_step_flat(rig: Rig) -> None:
    rig.register("soak")
    rig.write_collections("soak")
    for step in range(SOAK_STEPS):
        rig.write_step("soak", step)
    notes = rig.notes()
    index_notes = [n for n in notes if "/index/" in note_key(n)]
    for note in notes:
        if note not in index_notes:
            rig.deliver(note)  # the collections file
    times: list[float] = []
    calls: list[int] = []
    in_moto = [0.0, 0]
    original = BotocoreStubber.__call__

    def timed_moto(self: BotocoreStubber, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            in_moto[0] += time.perf_counter() - start
            in_moto[1] += 1

    with mock.patch.object(BotocoreStubber, "__call__", timed_moto):
        for note in index_notes:
            in_moto[:] = [0.0, 0]
            start = time.perf_counter()
            result: dict[str, Any] = rig.deliver(note)
            times.append(time.perf_counter() - start - in_moto[0])
            calls.append(in_moto[1])
            assert result["action"] == "evaluated"
            if len(times) == 3 * (SOAK_STEPS // 4):  # the last quarter: what the evaluator keeps allocated
                gc.collect()
                tracemalloc.start()
    gc.collect()
    # the package's own files only: a checkout may itself live in a folder named tornasole (CI's clone),
    # where "*/tornasole/*" would also count moto's growing tables in .venv
    package = os.path.dirname(tornasole.__file__)
    kept = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, f"{package}{os.sep}*")])
    tracemalloc.stop()
    quarter = len(times) // 4
    early, late = times[quarter : 2 * quarter], times[2 * quarter : 3 * quarter]  # untraced quarters
    assert statistics.median(late) < 2.0 * statistics.median(early) + 0.005, (
        statistics.median(early),
        statistics.median(late),
    )
    assert max(calls[quarter:]) <= max(calls[quarter : 2 * quarter])  # AWS calls per step do not grow
    growth = sum(stat.size for stat in kept.statistics("filename"))
    assert growth < 8 * 1024 * 1024, f"the evaluator kept {growth >> 20} MiB more over the last quarter"
    rig.tally("soak", list(range(SOAK_STEPS)))
    assert len(times) == SOAK_STEPS

"""Load (many concurrent jobs) and long life (many steps in one warm process).

Default sizes keep the normal test run short (4 jobs x 2 workers x 10 steps;
80 steps in one process); ``TORNASOLE_RELIABILITY_FULL=1`` (``make reliability``)
runs 50 jobs x 4 workers x 200 steps and 10,000 steps.

Flat per-step work is measured on the evaluator's side, and deterministically:
per delivered step, the index files the evaluation loads (its own and the earlier
steps its rules read back), the AWS calls, and the bytes sent to and received from
AWS. A step that rereads the run's history, or a state item that grows with the
run, makes them grow. Wall-clock time per step is not asserted here: on a shared
2-core CI machine, with another test session beside this one, it measures the
neighbour (a later quarter once took 2.5 times an earlier one with no change in
the code), and moto's own time grows with its table (it deep-copies the whole
table on every transaction; AWS does nothing of the kind). ``bench/step_cost.py``
times a step after 10 and after 10,000 prior ones. (Counting the lines run with
``sys.settrace`` was tried and dropped: in CI's long test session the first traced
step never returned, the interpreter spinning in the test's own frame; alone, the
test passed.) Memory is what the
evaluator's own code still holds allocated after the last quarter of the run
(``tracemalloc`` filtered to Tornasole's files): the process's resident size also
holds moto's table and the deep copies moto keeps, which say nothing about the
evaluator.
"""

from __future__ import annotations

import gc
import os
import random
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from unittest import mock

from moto.core.botocore_stubber import BotocoreStubber
from reliability_rig import FULL, Rig, moto_serialised, note_key

import tornasole
from tornasole.trials.trial import Trial

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


def test_a_warm_process_keeps_memory_and_work_per_step_flat(rig: Rig) -> None:
    rig.register("soak")
    rig.write_collections("soak")
    for step in range(SOAK_STEPS):
        rig.write_step("soak", step)
    notes = rig.notes()
    index_notes = [n for n in notes if "/index/" in note_key(n)]
    for note in notes:
        if note not in index_notes:
            rig.deliver(note)  # the collections file
    work = {"aws_calls": 0, "aws_bytes": 0, "index_files": 0}
    calls: list[int] = []
    payload: list[int] = []
    index_files: list[int] = []
    original_process = BotocoreStubber.process_request
    original_load = Trial.load_index_files

    def measured_process(self: BotocoreStubber, request: Any) -> Any:
        response = original_process(self, request)
        work["aws_calls"] += 1
        work["aws_bytes"] += len(request.body or b"")
        if response is not None:
            work["aws_bytes"] += len(response[2] or b"")
        return response

    def counted_load(self: Trial, index_paths: Any) -> list[int]:
        paths = list(index_paths)
        work["index_files"] += len(paths)
        return original_load(self, paths)

    with (
        mock.patch.object(BotocoreStubber, "process_request", measured_process),
        mock.patch.object(Trial, "load_index_files", counted_load),
    ):
        for index, note in enumerate(index_notes):
            work.update(aws_calls=0, aws_bytes=0, index_files=0)
            result: dict[str, Any] = rig.deliver(note)
            calls.append(work["aws_calls"])
            payload.append(work["aws_bytes"])
            index_files.append(work["index_files"])
            assert result["action"] == "evaluated"
            if index + 1 == 3 * (SOAK_STEPS // 4):  # the last quarter: what the evaluator keeps allocated
                gc.collect()
                tracemalloc.start()
    gc.collect()
    # the package's own files only: a checkout may itself live in a folder named tornasole (CI's clone),
    # where "*/tornasole/*" would also count moto's growing tables in .venv
    package = os.path.dirname(tornasole.__file__)
    kept = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, f"{package}{os.sep}*")])
    tracemalloc.stop()
    quarter = len(index_notes) // 4
    assert min(index_files) > 0, "no index file was loaded"
    # the index files a step's evaluation loads (its own and the earlier steps its rules read): bounded by
    # the rules' history, never the whole run
    assert max(index_files[quarter:]) <= max(index_files[quarter : 2 * quarter]), index_files
    assert max(calls[quarter:]) <= max(calls[quarter : 2 * quarter])  # AWS calls per step do not grow
    # nor the bytes that go to and come from AWS (a state item or object that grows with the run); a step
    # number's digits vary them by a few bytes
    most_early, most_late = max(payload[quarter : 2 * quarter]), max(payload[2 * quarter :])
    assert most_late <= most_early + 64, (most_early, most_late)
    growth = sum(stat.size for stat in kept.statistics("filename"))
    assert growth < 8 * 1024 * 1024, f"the evaluator kept {growth >> 20} MiB more over the last quarter"
    rig.tally("soak", list(range(SOAK_STEPS)))
    assert len(calls) == SOAK_STEPS

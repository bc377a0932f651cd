"""Load (many concurrent jobs) and long life (many steps in one warm process).

Default sizes keep the normal test run short (4 jobs x 2 workers x 10 steps;
80 steps in one process); ``TORNASOLE_RELIABILITY_FULL=1`` (``make reliability``)
runs 50 jobs x 4 workers x 200 steps and 10,000 steps.

Flat per-step work is measured on the evaluator's side, and deterministically:
the lines of Tornasole's own files executed per delivered step (``sys.settrace``,
switched off while moto handles a request), the number of AWS calls per step and
the bytes sent to and received from AWS per step. A step that rereads the run's
history, or a state item that grows with the run, makes them grow. Wall-clock
time per step is not asserted here: on a shared 2-core CI machine, with another
test session running beside this one, it measures the neighbour (a later quarter
once took 2.5 times the earlier one with no change in the code); moto's own time
also grows with its table (it deep-copies the whole table on every transaction,
AWS does nothing of the kind). ``bench/step_cost.py`` times a step after 10 and
after 10,000 prior ones. Memory is what the evaluator's own code still holds
allocated after the last quarter of the run (``tracemalloc`` filtered to
Tornasole's files): the process's resident size also holds moto's table and the
deep copies moto keeps, which say nothing about the evaluator.
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import sys
import threading
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
    quarter = len(index_notes) // 4
    # the compared quarters, at most 40 steps of each: line tracing is slow
    sampled = set(range(quarter, 3 * quarter, max(1, quarter // 40)))
    package = os.path.dirname(tornasole.__file__) + os.sep
    counter = _WorkCounter(package)
    lines: list[int] = []
    calls: list[int] = []
    payload: list[int] = []
    original_call = BotocoreStubber.__call__
    original_process = BotocoreStubber.process_request

    def untraced_moto(self: BotocoreStubber, *args: Any, **kwargs: Any) -> Any:
        counter.pause()
        try:
            return original_call(self, *args, **kwargs)
        finally:
            counter.aws_calls += 1
            counter.resume()

    def measured_process(self: BotocoreStubber, request: Any) -> Any:
        response = original_process(self, request)
        counter.aws_bytes += len(request.body or b"")
        if response is not None:
            counter.aws_bytes += len(response[2] or b"")
        return response

    with (
        mock.patch.object(BotocoreStubber, "__call__", untraced_moto),
        mock.patch.object(BotocoreStubber, "process_request", measured_process),
    ):
        for index, note in enumerate(index_notes):
            counter.reset()
            if index in sampled:
                counter.start()
            try:
                result: dict[str, Any] = rig.deliver(note)
            finally:
                counter.stop()
            lines.append(counter.lines)
            calls.append(counter.aws_calls)
            payload.append(counter.aws_bytes)
            assert result["action"] == "evaluated"
            if index + 1 == 3 * (SOAK_STEPS // 4):  # the last quarter: what the evaluator keeps allocated
                gc.collect()
                tracemalloc.start()
    gc.collect()
    # the package's own files only: a checkout may itself live in a folder named tornasole (CI's clone),
    # where "*/tornasole/*" would also count moto's growing tables in .venv
    kept = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, f"{package}*")])
    tracemalloc.stop()
    early = [lines[i] for i in sorted(sampled) if i < 2 * quarter]
    late = [lines[i] for i in sorted(sampled) if i >= 2 * quarter]
    assert min(early) > 0, "no line of the evaluator was traced"
    # the evaluator's own Python work per step (lines run in Tornasole's files, moto excluded): deterministic,
    # unlike wall-clock time on a shared CI machine. It is the same at every step (3,360 lines in 2026-12); a
    # step that touches each earlier step once adds two lines a step, 30 between the quarters' medians at 60
    median_early, median_late = statistics.median(early), statistics.median(late)
    assert median_late <= median_early + 8, (median_early, median_late)
    assert max(calls[quarter:]) <= max(calls[quarter : 2 * quarter])  # AWS calls per step do not grow
    # nor the bytes that go to and come from AWS (a state item or object that grows with the run); a step
    # number's digits vary them by a few bytes
    most_early, most_late = max(payload[quarter : 2 * quarter]), max(payload[2 * quarter :])
    assert most_late <= most_early + 64, (most_early, most_late)
    growth = sum(stat.size for stat in kept.statistics("filename"))
    assert growth < 8 * 1024 * 1024, f"the evaluator kept {growth >> 20} MiB more over the last quarter"
    rig.tally("soak", list(range(SOAK_STEPS)))
    assert len(lines) == SOAK_STEPS


class _WorkCounter:
    """Counts the lines executed in the package's files, and AWS calls and bytes, for one delivered step."""

    def __init__(self, package: str) -> None:
        self.package = package
        self.tracing, self.thread = False, threading.get_ident()
        self.reset()

    def reset(self) -> None:
        self.lines = self.aws_calls = self.aws_bytes = 0

    def _local(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            self.lines += 1
        return self._local

    def _global(self, frame: Any, event: str, arg: Any) -> Any:
        return self._local if frame.f_code.co_filename.startswith(self.package) else None

    def start(self) -> None:
        self.tracing, self.thread = True, threading.get_ident()
        sys.settrace(self._global)

    def stop(self) -> None:
        self.tracing = False
        sys.settrace(None)

    def pause(self) -> None:  # only the delivering thread traces; a call from another thread leaves it alone
        if self.tracing and threading.get_ident() == self.thread:
            sys.settrace(None)

    def resume(self) -> None:
        if self.tracing and threading.get_ident() == self.thread:
            sys.settrace(self._global)

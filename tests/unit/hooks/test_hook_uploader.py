"""The background writer: step order, event before index, retries with backoff, back-pressure."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tornasole.hooks.uploader import AsyncTrialWriter, RetryingStorage, StepJob
from tornasole.modes import ModeKeys
from tornasole.storage.schemes import get_storage


def _job(step: int) -> StepJob:
    return StepJob(
        step, ModeKeys.TRAIN, step, "worker_0", [("t", "x", np.arange(3, dtype=np.float32) + step, 1.0)]
    )


def test_steps_in_order_event_before_index_collections_then_end(tmp_path: Path, recording_storage):
    storage = recording_storage(str(tmp_path))
    writer = AsyncTrialWriter(str(tmp_path), storage, max_queue=2)
    for step in (0, 3, 1):
        writer.submit_step(_job(step))
    writer.submit_collections("worker_0", {}, 1)
    writer.close(end_marker_worker="worker_0")
    rel = [p[len(str(tmp_path)) + 1 :].split("/")[0] + ":" + p.rsplit("/", 1)[1][:12] for p in storage.writes]
    assert rel == [
        "events:000000000000",
        "index:000000000000",
        "events:000000000003",
        "index:000000000003",
        "events:000000000001",
        "index:000000000001",
        "collections:worker_0_col",
        "training_job_end.ts:training_job",
    ]


def test_retrying_storage_backs_off_then_succeeds(tmp_path: Path, recording_storage):
    flaky = recording_storage(str(tmp_path), fail_first=2)
    storage = RetryingStorage(flaky, attempts=4, base_delay=0.05)
    start = time.monotonic()
    storage.write_atomic(str(tmp_path / "a.bin"), b"data")
    elapsed = time.monotonic() - start
    assert (tmp_path / "a.bin").read_bytes() == b"data"
    assert storage.retries == 2
    assert elapsed >= 0.05 + 0.1  # exponential: 0.05 then 0.1
    with pytest.raises(OSError, match="injected"):
        RetryingStorage(
            recording_storage(str(tmp_path), fail_first=9), attempts=2, base_delay=0.0
        ).write_atomic(str(tmp_path / "b.bin"), b"x")


def test_a_store_that_stays_down_gets_one_attempt_per_write_until_it_recovers(
    tmp_path: Path, recording_storage
):
    flaky = recording_storage(str(tmp_path), fail_first=5)
    storage = RetryingStorage(flaky, attempts=3, base_delay=0.0)
    for name in ("a", "b"):
        with pytest.raises(OSError):
            storage.write_atomic(str(tmp_path / name), b"x")
    assert [p.rsplit("/", 1)[1] for p in flaky.attempts] == ["a", "a", "a", "b"]
    assert storage.degraded
    with pytest.raises(OSError):
        storage.write_atomic(str(tmp_path / "c"), b"x")  # 5th failure
    storage.write_atomic(str(tmp_path / "d"), b"x")  # the store is back
    assert not storage.degraded
    assert (tmp_path / "d").read_bytes() == b"x"


def test_bounded_queue_applies_back_pressure(tmp_path: Path):
    gate = threading.Event()

    class SlowStorage:
        def __init__(self):
            self.inner = get_storage(str(tmp_path))

        def write_atomic(self, path, data):
            gate.wait(5)
            self.inner.write_atomic(path, data)

    writer = AsyncTrialWriter(str(tmp_path), SlowStorage(), max_queue=1)
    submitted = []

    def produce():
        for step in range(4):
            writer.submit_step(_job(step))
            submitted.append(step)

    t = threading.Thread(target=produce)
    t.start()
    time.sleep(0.3)
    assert len(submitted) < 4  # the producer is blocked while the writer is stuck
    gate.set()
    t.join(5)
    writer.close(end_marker_worker=None)
    assert submitted == [0, 1, 2, 3]
    assert writer.steps_written == 4
    assert not (tmp_path / "training_job_end.ts").exists()

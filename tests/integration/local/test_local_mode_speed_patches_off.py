"""The local mode with moto's speed patches off (TORNASOLE_MOTO_SPEED_PATCHES=0): the same verdicts.

What a moto outside the checked releases gets: only the correctness patches, the
stream read through GetRecords, this process's requests over the socket.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest

from tornasole import config
from tornasole.format.writer import StepWriter, TrialWriter
from tornasole.jobs import describe, register_job, rule_job_summary
from tornasole.local import LocalMode, LocalSettings
from tornasole.local.moto_patches import in_process_transport
from tornasole.modes import ModeKeys

RULE = "ExplodingTensor"


@pytest.fixture
def slow_local(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalMode]:
    monkeypatch.setenv(config.MOTO_SPEED_PATCHES, "0")
    with LocalMode(LocalSettings(port=0, schedule_seconds=1)) as mode:
        yield mode


def _write_run(trial: str, losses: list[float]) -> None:
    writer = TrialWriter(trial)
    writer.write_collections({"losses": {"name": "losses", "include_regex": ["loss.*"]}}, 1)
    for step, loss in enumerate(losses):
        sw = StepWriter(step, "worker_0", mode=ModeKeys.TRAIN, mode_step=step)
        sw.add_tensor("loss", np.float32(loss), wall_time=1.0)
        writer.write_step(sw)
    writer.write_end_marker()


def _wait_completed(job: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while describe(job)["TrainingJobStatus"] != "Completed":
        assert time.monotonic() < deadline, describe(job)
        time.sleep(0.2)


def test_runs_are_evaluated_with_the_speed_patches_off(slow_local: LocalMode) -> None:
    assert slow_local.speed_patches == frozenset()
    assert not in_process_transport.served_in_process(f"{slow_local.endpoint}/")
    assert slow_local.dispatcher is not None
    assert slow_local.dispatcher.stream.reader is None  # GetShardIterator + GetRecords
    for job, losses in (("healthy", [1.0, 0.5, 0.25]), ("exploding", [1.0, float("nan"), 0.2])):
        params = {"rule_to_invoke": RULE}
        register_job(
            job, f"{slow_local.trial_root}{job}", [{"RuleConfigurationName": RULE, "RuleParameters": params}]
        )
        _write_run(f"{slow_local.trial_root}{job}", losses)
    for job in ("healthy", "exploding"):
        _wait_completed(job)
    assert [s["RuleEvaluationStatus"] for s in rule_job_summary("healthy")] == ["NoIssuesFound"]
    assert [s["RuleEvaluationStatus"] for s in rule_job_summary("exploding")] == ["IssuesFound"]
    assert slow_local.drain(timeout=60)
    assert slow_local.dispatcher.errors == []

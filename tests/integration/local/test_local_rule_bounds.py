"""The local mode bounds a custom rule as the sandbox does: no rule takes a worker or ``local up`` down.

In process, a rule that swallows the watchdog's stop (``except BaseException`` in a loop) held its
evaluation worker for good, two of them wedged both, and ``os._exit`` ended ``local up`` itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from tornasole.aws.clients import client
from tornasole.evaluator.sandbox.isolation import Budget
from tornasole.format.writer import StepWriter, TrialWriter
from tornasole.jobs import Rule, register_job, rule_job_summary
from tornasole.lambda_support.handlers import on_object_created
from tornasole.local import LocalMode, LocalSettings
from tornasole.modes import ModeKeys

HOSTILE = b"""
import os
import time
from smdebug.rules.rule import Rule


class Hostile(Rule):
    def __init__(self, base_trial, how="swallow"):
        super().__init__(base_trial)
        self.how = how

    def invoke_at_step(self, step):
        if self.how == "fine":  # a rule that behaves: its verdict, from the child, as in process
            return float(self.base_trial.tensor("loss").value(step).mean()) > 0.5
        if self.how == "exit":
            os._exit(7)
        while True:  # swallows every stop the watchdog sends
            try:
                time.sleep(0.01)
            except BaseException:
                pass
"""


@pytest.fixture
def local() -> Iterator[LocalMode]:
    with LocalMode(LocalSettings(port=0)) as mode:
        yield mode


def _write_run(trial: str, losses: list[float]) -> None:
    writer = TrialWriter(trial)
    writer.write_collections({"losses": {"name": "losses", "include_regex": ["loss.*"]}}, 1)
    for step, loss in enumerate(losses):
        sw = StepWriter(step, "worker_0", mode=ModeKeys.TRAIN, mode_step=step)
        sw.add_tensor("loss", np.float32(loss), wall_time=1.0)
        writer.write_step(sw)
    writer.write_end_marker()


def _statuses(job: str) -> list[str]:
    try:
        return [s["RuleEvaluationStatus"] for s in rule_job_summary(job)]
    except Exception:  # noqa: BLE001 - not registered yet
        return []


def _wait(jobs: dict[str, list[str]], timeout: float) -> dict[str, list[str]]:
    deadline = time.monotonic() + timeout
    seen: dict[str, list[str]] = {}
    while time.monotonic() < deadline:
        seen = {job: _statuses(job) for job in jobs}
        if seen == jobs:
            return seen
        time.sleep(0.1)
    return seen


def test_rules_that_swallow_their_stop_or_exit_cost_their_own_verdicts_only(
    local: LocalMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert local.dispatcher is not None
    # a short rule budget (the child is killed GRACE_S after it), long enough for the well-behaved rule's
    # child to start and answer on a loaded machine (at 1 s it timed out under a parallel suite)
    monkeypatch.setattr(on_object_created.evaluator().runner, "budget", Budget(seconds=4.0))
    bucket = local.settings.bucket
    client("s3").put_object(Bucket=bucket, Key="rules/hostile.py", Body=HOSTILE)
    source = f"s3://{bucket}/rules/hostile.py"
    exits: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: exits.append(args.exc_value))
    for job, how in (("swallow-1", "swallow"), ("swallow-2", "swallow"), ("exits", "exit"), ("fine", "fine")):
        rule = Rule.custom("Hostile", source=source, rule_to_invoke="Hostile", rule_parameters={"how": how})
        register_job(job, f"{local.trial_root}{job}", [rule])
        _write_run(f"{local.trial_root}{job}", [1.0])
    expected = {"swallow-1": ["Error"], "swallow-2": ["Error"], "exits": ["Error"], "fine": ["IssuesFound"]}
    assert _wait(expected, timeout=90) == expected
    # both workers serve on, and this process (local up) is alive to see it
    builtin = {
        "RuleConfigurationName": "ExplodingTensor",
        "RuleParameters": {"rule_to_invoke": "ExplodingTensor"},
    }
    register_job("after", f"{local.trial_root}after", [builtin])
    _write_run(f"{local.trial_root}after", [1.0, float("nan")])
    assert _wait({"after": ["IssuesFound"]}, timeout=30) == {"after": ["IssuesFound"]}
    assert local.drain(timeout=30)
    assert local.dispatcher.errors == []
    assert exits == []  # no worker thread died
    summary = {job: rule_job_summary(job)[0].get("StatusDetails", "") for job in ("swallow-1", "exits")}
    assert "stopped after" in summary["swallow-1"], summary
    assert "ended without a verdict (status 7)" in summary["exits"], summary

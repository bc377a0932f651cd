"""Custom rules in local mode: each run in a child forked for it, so no rule takes ``local up`` down.

Why: in process, ``isolation.guarded`` stops a rule by raising in its thread, which a rule can
swallow (``except BaseException`` in a loop) and so hold an evaluation worker for good (two such
rules wedge both), and nothing in process survives ``os._exit``. Forked (``forked.run_forked``), the
rule's process is killed once its budget and a grace period are spent, and its exit is its own:
the reply is the rule's verdict or its error at that step, as from the sandbox function in AWS.

The child reads the trial with the local user's own credentials (the local mode has no reader role),
over a client of its own: the parent's cached clients and connection pools are not shared, and
requests to the local endpoint go over its socket, not through the parent's in-process moto
(``transport``), whose locks another thread may have held at the fork. Built-in rules stay in process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Any

from tornasole.evaluator.details import clip
from tornasole.evaluator.failures import TransientError
from tornasole.evaluator.models import History, RuleConfig, StepFiles, StepOutcome
from tornasole.evaluator.runner import RESULTS_RESERVE_S, StepRunner
from tornasole.evaluator.sandbox.confine import Limits
from tornasole.evaluator.sandbox.forked import run_forked
from tornasole.evaluator.sandbox.rule_process import rule_reply
from tornasole.evaluator.sandbox.rule_runners import Remaining
from tornasole.evaluator.sandbox.wire import (
    MAX_REPLY_BYTES,
    SandboxReplyError,
    outcome_from_reply,
    rule_windows,
)

__all__ = ["GRACE_S", "ForkedCustomRuleRunner"]

#: Seconds past the rule's budget before its process is killed (the watchdog stops a rule that lets it).
GRACE_S = 2.0


def _own_storage() -> Any:
    """An S3 storage on a client built in this (child) process, reaching the endpoint over its socket."""
    import boto3

    from tornasole.local.moto_patches import in_process_transport
    from tornasole.storage.s3 import S3Storage

    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        in_process_transport.unroute(endpoint)
    return S3Storage(client=boto3.session.Session().client("s3"))


class ForkedCustomRuleRunner:
    """Runs each custom rule as ``step_runner`` would, in a child forked for that run.

    ``step_runner``'s budget is read at each run (its deadline bounds the child's life);
    ``limits``: the child's rlimits and seccomp filter (``confine``)."""

    def __init__(
        self, step_runner: StepRunner, limits: Limits | None = None, grace_s: float = GRACE_S
    ) -> None:
        self.step_runner = step_runner
        self.limits = limits or Limits()
        self.grace_s = grace_s

    def evaluate(
        self,
        job_name: str,
        trial_path: str,
        files: StepFiles,
        config: RuleConfig,
        history: History | None = None,
        remaining_s: Remaining = None,
    ) -> StepOutcome:
        budget = self.step_runner.budget.within(remaining_s() if remaining_s else None, RESULTS_RESERVE_S)
        recent, first = rule_windows(history)  # queried here: the child has no table client of its own

        def run() -> dict[str, Any]:
            runner = StepRunner.on_storage(_own_storage(), budget)
            return rule_reply(runner, job_name, trial_path, files, config, recent, first)

        start = time.perf_counter()
        reply = run_forked(run, budget.seconds + self.grace_s, MAX_REPLY_BYTES, limits=self.limits)
        ms = (time.perf_counter() - start) * 1000
        try:
            kind, outcome = outcome_from_reply(json.dumps(reply).encode(), config, files.step)
        except SandboxReplyError as exc:
            return StepOutcome(config.name, files.step, error=clip(f"{config.name}: {exc}"), latency_ms=ms)
        if kind == "transient":
            raise TransientError(f"rule {config.name} at step {files.step}: {outcome.step_error}")
        if outcome.error and not outcome.error.startswith(config.name):
            outcome = dataclasses.replace(outcome, error=clip(f"{config.name}: {outcome.error}"))
        return dataclasses.replace(outcome, latency_ms=ms)

"""Where a custom rule's code runs: in this process, or in the rule sandbox function.

Why a sandbox: a custom rule is a user's code. Run in the evaluator, it would hold the evaluator's
credentials (state table writes, events, stop signals) and could read every job's trial. In AWS the
evaluator therefore hands each custom rule to its own function (``LambdaCustomRuleRunner``):

* it assumes the reader role with an inline session policy (``session_policy``) granting only reads
  of that job's trial and the rule file, for 15 minutes, and passes those credentials along;
* the sandbox function (``lambda_support.handlers.custom_rule``) builds its S3 client from them only
  (its own role can write logs and nothing else), runs the rule as the evaluator would
  (``InProcessCustomRuleRunner``: ``isolation.guarded``, the rule prefix enforced) and returns one
  verdict, which is checked as hostile input (``wire``).

Failures follow ``failures``: throttling and 5xx from STS or Lambda raise ``TransientError`` (the
step stays pending and is retried); the sandbox dying (its ``FunctionError``: the rule timed the
function out, ran it out of memory, or broke the runtime) or a malformed reply is that rule's
``error`` at that step; any other STS/Lambda error (missing function, access denied: a deployment
problem) propagates as is, so the step's attempts are counted and it is not blamed on the rule.

Local mode has no sandbox function: there the one user writes training data and rules alike, and
the evaluator's credentials are that user's own. Its dispatcher runs each custom rule in a child
process forked for the run (``tornasole.local.rule_child``), so a rule that will not stop costs its
verdict, not ``local up``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tornasole.evaluator.details import clip
from tornasole.evaluator.failures import TransientError, is_transient
from tornasole.evaluator.models import History, RuleConfig, StepFiles, StepOutcome
from tornasole.evaluator.sandbox.session_policy import (
    SESSION_SECONDS,
    policy_text,
    session_name,
    session_policy,
)
from tornasole.evaluator.sandbox.wire import (
    MAX_REPLY_BYTES,
    SandboxReplyError,
    SandboxRequest,
    outcome_from_reply,
    rule_windows,
)

__all__ = [
    "CustomRuleRunner",
    "InProcessCustomRuleRunner",
    "InvokeReply",
    "RunsRules",
    "LambdaCustomRuleRunner",
    "lambda_invoke",
]

log = logging.getLogger(__name__)

Remaining = Callable[[], float] | None

#: Seconds of the evaluator's remaining time kept for the invocation's round trip: the sandbox is told
#: the rest, and keeps its own reserve (``runner.RESULTS_RESERVE_S``) below that for the rule's deadline,
#: so the evaluator still has that reserve to write the verdict.
INVOKE_OVERHEAD_S = 2.0
#: Reuse a job's credentials only while they outlive the longest sandbox run by a margin.
SESSION_REUSE_MARGIN_S = 300.0
MAX_CACHED_SESSIONS = 256


class CustomRuleRunner(Protocol):
    """Evaluates one custom rule at one step of a job's trial."""

    def evaluate(
        self,
        job_name: str,
        trial_path: str,
        files: StepFiles,
        config: RuleConfig,
        history: History | None = None,
        remaining_s: Remaining = None,
    ) -> StepOutcome: ...


class RunsRules(Protocol):
    """Runs rules at one step (``runner.StepRunner``): what a custom rule's own process runs it with."""

    def run(
        self,
        job_name: str,
        trial_path: str,
        files: StepFiles,
        rules: list[RuleConfig],
        history: History | None = None,
        remaining_s: Remaining = None,
    ) -> list[StepOutcome]: ...


class InProcessCustomRuleRunner:
    """The rule in this process, on a trial of its own (what the sandbox function runs, on storage
    holding the job-scoped credentials); ``TransientError`` propagates."""

    def __init__(self, step_runner: RunsRules) -> None:
        self.step_runner = step_runner

    def evaluate(
        self,
        job_name: str,
        trial_path: str,
        files: StepFiles,
        config: RuleConfig,
        history: History | None = None,
        remaining_s: Remaining = None,
    ) -> StepOutcome:
        (outcome,) = self.step_runner.run(job_name, trial_path, files, [config], history, remaining_s)
        return outcome


@dataclass(frozen=True)
class InvokeReply:
    """What a synchronous invocation returned: the payload, and Lambda's ``FunctionError`` if any."""

    payload: bytes
    function_error: str | None = None


Invoke = Callable[[bytes], InvokeReply]


#: Seconds to wait for the sandbox's reply: longer than its function timeout (``stack_spec``), so a
#: rule that runs the function out of time comes back as its ``FunctionError``, not a client timeout.
INVOKE_READ_TIMEOUT_S = 180.0


def lambda_invoke(function_name: str, client: Any = None) -> Invoke:
    """``lambda:InvokeFunction`` (RequestResponse) of ``function_name``; reads at most one byte past
    the reply limit. The client is the process-wide one unless injected."""

    def invoke(payload: bytes) -> InvokeReply:
        from tornasole.aws.clients import client as cached_client

        lam = client or cached_client("lambda", read_timeout=INVOKE_READ_TIMEOUT_S)
        resp = lam.invoke(FunctionName=function_name, InvocationType="RequestResponse", Payload=payload)
        body = resp["Payload"]
        try:
            data = body.read(MAX_REPLY_BYTES + 1)
        finally:
            body.close()
        return InvokeReply(data, resp.get("FunctionError"))

    return invoke


class LambdaCustomRuleRunner:
    """Each custom rule run in the sandbox function with credentials scoped to its job's trial."""

    def __init__(
        self,
        function_name: str,
        reader_role_arn: str,
        invoke: Invoke | None = None,
        sts: Any = None,
    ) -> None:
        self.function_name = function_name
        self.reader_role_arn = reader_role_arn
        self.invoke = invoke or lambda_invoke(function_name)
        self._sts = sts
        # (job, session policy) -> (expiry, credentials): a warm evaluator assumes the role once per job
        # and rule file for most of a session's life, not once per rule per step
        self._sessions: dict[tuple[str, str], tuple[float, dict[str, str]]] = {}
        self._lock = threading.Lock()

    @property
    def sts(self) -> Any:
        if self._sts is not None:
            return self._sts
        from tornasole.aws.clients import client

        return client("sts")

    def credentials(self, job_name: str, policy: dict[str, Any]) -> dict[str, str]:
        """Temporary credentials of the reader role narrowed by ``policy`` (``AssumeRole``); reused
        while they have more than ``SESSION_REUSE_MARGIN_S`` to live (a sandbox run must not outlive them)."""
        key = (job_name, policy_text(policy))
        with self._lock:
            cached = self._sessions.get(key)
        if cached is not None and cached[0] - time.time() > SESSION_REUSE_MARGIN_S:
            return cached[1]
        creds = self._assume(job_name, policy)
        with self._lock:
            if len(self._sessions) >= MAX_CACHED_SESSIONS:
                self._sessions.pop(next(iter(self._sessions)))
            self._sessions[key] = (time.time() + SESSION_SECONDS, creds)
        return creds

    def _assume(self, job_name: str, policy: dict[str, Any]) -> dict[str, str]:
        try:
            resp = self.sts.assume_role(
                RoleArn=self.reader_role_arn,
                RoleSessionName=session_name(job_name),
                Policy=policy_text(policy),
                DurationSeconds=SESSION_SECONDS,
            )
        except Exception as exc:
            if is_transient(exc):
                raise TransientError(f"assuming the rule reader role for {job_name}: {exc}") from exc
            raise
        creds = resp["Credentials"]
        return {k: creds[k] for k in ("AccessKeyId", "SecretAccessKey", "SessionToken")}

    def evaluate(
        self,
        job_name: str,
        trial_path: str,
        files: StepFiles,
        config: RuleConfig,
        history: History | None = None,
        remaining_s: Remaining = None,
    ) -> StepOutcome:
        step = files.step
        try:
            policy = session_policy((trial_path, *config.other_trials), config.source_s3_uri or "")
        except ValueError as exc:
            return StepOutcome(config.name, step, error=clip(f"{config.name}: cannot be sandboxed: {exc}"))
        recent, first = rule_windows(history)  # queried here: the sandbox has no table
        request = SandboxRequest(
            job_name,
            trial_path,
            step,
            files.workers,
            config,
            self.credentials(job_name, policy),
            recent,
            first,
            seconds=max(0.1, remaining_s() - INVOKE_OVERHEAD_S) if remaining_s else None,
        )
        try:
            payload = request.to_bytes()
        except ValueError as exc:
            return StepOutcome(config.name, step, error=clip(f"{config.name}: {exc}"))
        start = time.perf_counter()
        try:
            reply = self.invoke(payload)
        except Exception as exc:
            if is_transient(exc):
                raise TransientError(f"invoking the rule sandbox for {config.name}: {exc}") from exc
            raise
        ms = (time.perf_counter() - start) * 1000
        if reply.function_error:
            why = clip(
                f"{config.name}: the rule sandbox failed ({reply.function_error}): {_error_text(reply)}"
            )
            log.warning(why, extra={"job": job_name, "rule": config.name, "step": step})
            return StepOutcome(config.name, step, error=why, latency_ms=ms)
        try:
            kind, outcome = outcome_from_reply(reply.payload, config, step)
        except SandboxReplyError as exc:
            why = f"{config.name}: the rule sandbox's reply was refused: {exc}"
            log.warning(why, extra={"job": job_name, "rule": config.name, "step": step})
            return StepOutcome(config.name, step, error=clip(why), latency_ms=ms)
        if kind == "transient":
            raise TransientError(f"rule {config.name} at step {step} in the sandbox: {outcome.step_error}")
        return dataclasses.replace(outcome, latency_ms=ms)


def _error_text(reply: InvokeReply) -> str:
    """Lambda's ``errorType: errorMessage`` of a failed invocation, or the start of its raw payload."""
    try:
        body = json.loads(reply.payload[:MAX_REPLY_BYTES].decode("utf-8"))
        if isinstance(body, dict):
            return f"{str(body.get('errorType', ''))[:128]}: {str(body.get('errorMessage', ''))[:512]}"
    except (UnicodeDecodeError, ValueError, RecursionError):
        pass
    return repr(reply.payload[:256])

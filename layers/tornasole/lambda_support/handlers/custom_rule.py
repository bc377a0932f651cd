"""The rule sandbox: one custom rule at one step, with only the credentials it was handed.

Invoked synchronously by the evaluator (``evaluator.sandbox.rule_runners.LambdaCustomRuleRunner``)
with a job-scoped set of temporary credentials (reads of that job's trial and the rule file, nothing
else). Every S3 call here is made by a client built from those credentials only, never from the function's own
role (which may write its logs and nothing else). The rule file is loaded through the same loader
as in the evaluator, and only from this function's configured rule prefix; the rule runs under
``isolation.guarded``, in a child process: in Lambda a child of the zygote forked at cold start
(``zygote``: the child holds its own request and no earlier one), elsewhere a child forked per request
(``forked``). What the rule leaves behind in its process never meets a later invocation, which may be
another job's. In Lambda the handler and the zygote are hardened before any event and each child is
confined (``confine``: not dumpable, no role keys in the environment, rlimits, seccomp, leftover
processes killed, ``/tmp`` wiped; ``docs/SECURITY.md``). Nothing is written: the verdict is the reply,
and the evaluator records it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from functools import cache
from typing import Any

from tornasole.evaluator.models import StepFiles, rule_source_problem
from tornasole.evaluator.runner import StepRunner
from tornasole.evaluator.sandbox import confine
from tornasole.evaluator.sandbox.forked import run_forked
from tornasole.evaluator.sandbox.rule_process import rule_reply
from tornasole.evaluator.sandbox.wire import MAX_REPLY_BYTES, SandboxRequest
from tornasole.evaluator.sandbox.zygote import Zygote
from tornasole.lambda_support.env import HandlerEnv
from tornasole.lambda_support.observability import inject_invocation_context, logger

__all__ = [
    "ENV_FORK",
    "ENV_TMP_ROOT",
    "allowed_rule_prefixes",
    "evaluate",
    "handler",
    "scoped_storage",
]

#: ``0`` runs the rule in the handler's own process (tests that record its AWS calls in-process).
ENV_FORK = "TORNASOLE_SANDBOX_FORK"
#: The directory each rule's ``TMPDIR`` is made in and that is wiped after every run: ``/tmp`` in
#: Lambda (where ``AWS_LAMBDA_RUNTIME_API`` is set); elsewhere only when set (never a shared ``/tmp``).
ENV_TMP_ROOT = "TORNASOLE_SANDBOX_TMP_ROOT"
# Seconds of the invocation kept for returning the reply after a rule run stopped by the backstop.
REPLY_RESERVE_S = 3.0


def allowed_rule_prefixes(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Where rule code may come from: the same rule as the evaluator's (``HandlerEnv``); nowhere
    when nothing is configured (the sandbox never falls back to reading code from anywhere)."""
    env = dict(os.environ if environ is None else environ)
    env.setdefault("TORNASOLE_STATE_TABLE", "-")  # the sandbox has no table or bus; only prefixes matter
    env.setdefault("TORNASOLE_EVENT_BUS", "-")
    return HandlerEnv.from_environ(env).allowed_rule_prefixes


@cache
def _boto_session() -> Any:
    """One boto3 session per cold start, its S3 model loaded before any fork (each child reuses it);
    never used for its own credentials: every client made here is given the request's."""
    import boto3

    session = boto3.session.Session()
    session._session.get_service_model("s3")  # noqa: SLF001 - warm botocore's loader cache
    return session


def scoped_storage(credentials: Mapping[str, str]) -> Any:
    """An S3 storage whose client signs with ``credentials`` only."""
    from botocore.config import Config

    from tornasole.storage.s3 import S3Storage

    client = _boto_session().client(
        "s3",
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
        region_name=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
        config=Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=32),
    )
    return S3Storage(client=client)


def _bounded(remaining_s: Any, seconds: float | None) -> Any:
    """The invocation's remaining time, never more than the ``seconds`` the evaluator can still wait."""
    if seconds is None:
        return remaining_s
    end = time.monotonic() + seconds

    def remaining() -> float:
        left = end - time.monotonic()
        return min(left, remaining_s()) if remaining_s else left

    return remaining


def _run_request(request: SandboxRequest, remaining_s: Any) -> dict[str, Any]:
    """One rule at one step on storage holding the request's credentials: the reply."""
    runner = StepRunner.on_storage(scoped_storage(request.credentials))
    files = StepFiles(request.step, request.workers)
    return rule_reply(
        runner, request.job, request.trial, files, request.rule, request.recent, request.first, remaining_s
    )


def _run_payload(payload: bytes) -> dict[str, Any]:
    """What a zygote's child runs: the request (already validated by the handler) and its deadline."""
    sent = json.loads(payload)
    deadline = sent["deadline"]  # CLOCK_MONOTONIC is the machine's: the same in the zygote's children
    remaining_s = None if deadline is None else (lambda: deadline - time.monotonic())
    return _run_request(SandboxRequest.from_event(sent["event"]), remaining_s)


def _tmp_root(environ: Mapping[str, str]) -> str | None:
    root = environ.get(ENV_TMP_ROOT) or ("/tmp" if environ.get("AWS_LAMBDA_RUNTIME_API") else None)  # noqa: S108
    return os.path.realpath(root) if root else None


def _harden_handler() -> None:
    """Before any event: the handler's memory closed to its own uid (a rule runs under it), and the
    handler the subreaper of what a rule leaves if it kills its zygote (``confine``)."""
    try:
        confine.set_dumpable(False)
        confine.make_subreaper()
    except OSError as exc:
        logger.warning("rule sandbox: the handler could not be hardened", extra={"why": str(exc)})


def _start_zygote(environ: Mapping[str, str]) -> Zygote | None:
    """In Lambda, the zygote is forked at cold start, before any event exists (``zygote``'s why), and
    the handler and the zygote are hardened first (``confine``).

    Elsewhere (local mode, tests) rules run in a child forked per request: one user's machine, and
    in-process moto state that a child forked earlier would not see.
    """
    if not environ.get("AWS_LAMBDA_FUNCTION_NAME") or environ.get(ENV_FORK, "1").strip() == "0":
        return None
    if not hasattr(os, "fork"):
        return None
    in_lambda = bool(environ.get("AWS_LAMBDA_RUNTIME_API"))  # the handler's process is the runtime's
    if in_lambda:  # elsewhere (a test's process) other children are not ours to kill
        _harden_handler()
    _boto_session()  # warm once, so that every child starts with botocore's models loaded
    limits = confine.Limits.for_lambda(dict(environ))
    zygote = Zygote(_run_payload, limits=limits, tmp_root=_tmp_root(environ), reap_orphans=in_lambda)
    return zygote.start()


_ZYGOTE = _start_zygote(os.environ)


def evaluate(event: Any, remaining_s: Any = None, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The reply to one request (what ``handler`` returns), for Lambda and for tests alike."""
    try:
        request = SandboxRequest.from_event(event)
    except ValueError as exc:
        return {"kind": "error", "reason": f"invalid sandbox request: {exc}"}
    remaining_s = _bounded(remaining_s, request.seconds)
    problem = rule_source_problem(request.rule, allowed_rule_prefixes(environ))
    if problem:
        return {"kind": "error", "reason": problem}
    env = os.environ if environ is None else environ
    if env.get(ENV_FORK, "1").strip() == "0" or not hasattr(os, "fork"):
        return _run_request(request, remaining_s)
    timeout = remaining_s() - REPLY_RESERVE_S if remaining_s else 300.0
    if _ZYGOTE is not None:
        deadline = time.monotonic() + remaining_s() if remaining_s else None
        payload = json.dumps({"event": event, "deadline": deadline}).encode()
        return _ZYGOTE.run(payload, timeout, MAX_REPLY_BYTES)
    _boto_session()
    return run_forked(lambda: _run_request(request, remaining_s), timeout, MAX_REPLY_BYTES)


@inject_invocation_context  # never logs the event: it holds credentials
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    reply = evaluate(event, remaining_s=lambda: context.get_remaining_time_in_millis() / 1000)
    job = event.get("job") if isinstance(event, dict) else None
    logger.info("custom rule evaluated", extra={"kind": reply["kind"], "job": str(job)[:256]})
    return reply

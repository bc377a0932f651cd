"""Custom rules through the rule sandbox, on moto: same verdicts, job-scoped credentials, hostile replies.

The sandbox function's code is the real handler (``functions/custom_rule``), driven in-process as
the runner's ``invoke`` (moto's Lambda runs functions only in Docker). STS is moto's: the sandbox
receives real temporary credentials of the reader role, and every S3 call it makes is signed with
them. moto applies a role's IAM policies when IAM authentication is on, but not an ``AssumeRole``
session policy; so the denial tests give the reader role exactly the session policy the runner sends
(in AWS the grant is the intersection of the two, and the role's is the wider) and switch moto's
IAM enforcement on around the sandbox's invocation: the denials come from moto evaluating our policy.
moto does not evaluate ``s3:prefix`` conditions, so listing another prefix is covered by the policy
unit tests (``tests/unit/evaluator/test_sandbox_policy.py``), not here.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber
from evaluator_stack import BUCKET, Stack
from moto.core import enable_iam_authentication

from tornasole.aws.clients import client
from tornasole.evaluator.failures import TransientError
from tornasole.evaluator.models import RuleConfig, StepOutcome
from tornasole.evaluator.runner import StepFiles, StepRunner
from tornasole.evaluator.sandbox.rule_runners import InvokeReply, LambdaCustomRuleRunner, lambda_invoke
from tornasole.evaluator.sandbox.session_policy import session_policy
from tornasole.evaluator.service import Evaluator
from tornasole.evaluator.store.state_table import StateTable
from tornasole.exceptions import ConfigurationError
from tornasole.jobs import Rule, TornasoleJobs
from tornasole.lambda_support.env import HandlerEnv
from tornasole.lambda_support.handlers import custom_rule
from tornasole.stack_spec import (
    ENV_CUSTOM_RULE_FUNCTION,
    ENV_CUSTOM_RULE_READER_ROLE,
    ENV_CUSTOM_RULES_PREFIX,
)

RULES = f"s3://{BUCKET}/custom-rules"
SOURCE = f"{RULES}/loss_above.py"
PROBE_SOURCE = f"{RULES}/probe.py"
FUNCTION = "tornasole-custom-rule"

LOSS_ABOVE = b"""
from smdebug.rules.rule import Rule


class LossAbove(Rule):
    def __init__(self, base_trial, threshold="0.5"):
        super().__init__(base_trial)
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        return float(self.base_trial.tensor("loss").value(step).mean()) > self.threshold
"""

# Tries what a hostile rule would, through the trial's own (scoped) storage and through boto3's
# default credentials, and reports each attempt in its error message.
PROBE = b"""
import json
import boto3
from smdebug.rules.rule import Rule

BUCKET = "tornasole-trials"


class Probe(Rule):
    def invoke_at_step(self, step):
        s, path = self.base_trial._storage, self.base_trial.path
        own = path + "/collections/000000000/worker_0_collections.json"
        other_key = "jobs/victim/index/000000000/000000000000_worker_0.json"
        other = "s3://" + BUCKET + "/" + other_key
        attempts = {
            "read_own": lambda: s.read(own),
            "read_other_job": lambda: s.read(other),
            "write_own_trial": lambda: s.write_atomic(path + "/training_job_end.ts", b"x"),
            "write_stop_signal": lambda: s.write_atomic(path + "/tornasole_stop_training", b"x"),
            "default_credentials": lambda: boto3.client("s3").get_object(Bucket=BUCKET, Key=other_key),
        }
        denied = ("AccessDenied", "InvalidAccessKeyId", "InvalidClientTokenId")
        seen = {}
        for name, attempt in attempts.items():
            try:
                attempt()
                seen[name] = "ok"
            except PermissionError:
                seen[name] = "denied"
            except Exception as exc:
                code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
                seen[name] = "denied" if code in denied else code
        raise RuntimeError("PROBE " + json.dumps(seen, sort_keys=True))
"""


def _setup(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(ENV_CUSTOM_RULES_PREFIX, RULES)
    s3 = client("s3")
    s3.put_object(Bucket=BUCKET, Key="custom-rules/loss_above.py", Body=LOSS_ABOVE)
    s3.put_object(Bucket=BUCKET, Key="custom-rules/probe.py", Body=PROBE)
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
    }
    role = client("iam").create_role(RoleName="reader", AssumeRolePolicyDocument=json.dumps(trust))
    return role["Role"]["Arn"]


def _sandbox(
    lambda_context: Any, enforce_iam: bool = False, seen: list[dict[str, Any]] | None = None
) -> Callable[[bytes], InvokeReply]:
    """The real sandbox handler as the runner's transport (the payload crosses as JSON bytes)."""

    def invoke(payload: bytes) -> InvokeReply:
        event = json.loads(payload)
        if seen is not None:
            seen.append(event)
        if enforce_iam:
            with enable_iam_authentication():
                reply = custom_rule.handler(event, lambda_context)
        else:
            reply = custom_rule.handler(event, lambda_context)
        return InvokeReply(json.dumps(reply).encode())

    return invoke


def _evaluator(stack: Stack, runner: StepRunner) -> Evaluator:
    env = HandlerEnv.from_environ()
    return Evaluator(
        StateTable(stack.res.table),
        runner=runner,
        allowed_rule_prefixes=env.allowed_rule_prefixes,
        trial_bucket=BUCKET,
    )


def _run_job(stack: Stack, evaluator: Evaluator, job: str, rules: list[Rule]) -> dict[int, list[Any]]:
    trial = f"s3://{BUCKET}/jobs/{job}"
    TornasoleJobs().register_job(job, trial, rules)
    stack.write_collections(trial=trial)
    for step, loss in ((0, 0.1), (1, 0.9), (2, 0.2), (3, 0.7)):
        stack.write_step(step, loss=loss, trial=trial)
    stack.notifications()
    out = {}
    for step in range(4):
        key = f"jobs/{job}/index/000000000/{step:012d}_worker_0.json"
        result = evaluator.handle_object_created(BUCKET, key)
        out[step] = sorted((o.rule_name, o.verdict, o.details, o.error) for o in result.outcomes)
    return out


def _rules(threshold: str = "0.5") -> list[Rule]:
    custom = Rule.custom(
        "LossAbove", source=SOURCE, rule_to_invoke="LossAbove", rule_parameters={"threshold": threshold}
    )
    vg = Rule.sagemaker(
        {"DebugRuleConfiguration": {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {}}},
        rule_parameters={"threshold": "0.001"},
    )
    return [custom, vg]


def test_a_sandboxed_custom_rule_gives_the_in_process_verdicts(stack, monkeypatch, lambda_context) -> None:
    role = _setup(monkeypatch)
    in_process = _run_job(stack, _evaluator(stack, StepRunner()), "local-job", _rules())
    runner = LambdaCustomRuleRunner(FUNCTION, role, invoke=_sandbox(lambda_context))
    sandboxed = _run_job(stack, _evaluator(stack, StepRunner(custom_rules=runner)), "sandboxed-job", _rules())
    assert sandboxed == in_process
    fired = [
        step
        for step, outs in sandboxed.items()
        for name, verdict, *_ in outs
        if name == "LossAbove" and verdict == "fired"
    ]
    assert fired == [1, 3]


def test_a_jobs_credentials_are_assumed_once_and_never_shared_with_another_job(
    stack, monkeypatch, lambda_context
) -> None:
    role = _setup(monkeypatch)
    seen: list[dict[str, Any]] = []
    runner = LambdaCustomRuleRunner(FUNCTION, role, invoke=_sandbox(lambda_context, seen=seen))
    evaluator = _evaluator(stack, StepRunner(custom_rules=runner))
    _run_job(stack, evaluator, "job-a", _rules())
    _run_job(stack, evaluator, "job-b", _rules())
    keys = {(e["job"], e["credentials"]["AccessKeyId"]) for e in seen}
    assert len(seen) == 8
    assert len(keys) == 2
    assert len({k for _, k in keys}) == 2


def test_the_sandbox_reads_its_trial_and_nothing_else_and_writes_nothing(
    stack, monkeypatch, lambda_context
) -> None:
    role = _setup(monkeypatch)
    victim = f"s3://{BUCKET}/jobs/victim"
    stack.write_collections(trial=victim)
    stack.write_step(0, trial=victim)
    job, trial = "prober", f"s3://{BUCKET}/jobs/prober"
    iam = client("iam")
    # moto enforces the role's policies, not the session policy: give the role exactly the session policy
    policy = session_policy([trial], PROBE_SOURCE)
    iam.put_role_policy(RoleName="reader", PolicyName="job", PolicyDocument=json.dumps(policy))
    runner = LambdaCustomRuleRunner(FUNCTION, role, invoke=_sandbox(lambda_context, enforce_iam=True))
    probe = Rule.custom("Probe", source=PROBE_SOURCE, rule_to_invoke="Probe")
    outcomes = _run_job(stack, _evaluator(stack, StepRunner(custom_rules=runner)), job, [probe])
    (name, verdict, _, error) = outcomes[0][0]
    assert (name, verdict) == ("Probe", "Error")
    seen = json.loads(error.split("PROBE ", 1)[1])
    assert seen == {
        "read_own": "ok",
        "read_other_job": "denied",
        "write_own_trial": "denied",
        "write_stop_signal": "denied",
        "default_credentials": "denied",
    }
    assert (
        not client("s3").list_objects_v2(Bucket=BUCKET, Prefix="jobs/prober/training_job_end").get("KeyCount")
    )


def test_the_sandbox_refuses_rule_code_outside_its_rule_prefix(stack, monkeypatch, lambda_context) -> None:
    role = _setup(monkeypatch)
    client("s3").put_object(Bucket=BUCKET, Key="jobs/evil/rule.py", Body=LOSS_ABOVE)
    runner = LambdaCustomRuleRunner(FUNCTION, role, invoke=_sandbox(lambda_context))
    # the evaluator refuses it before asking; here the sandbox is asked directly (a compromised caller)
    rule = RuleConfig("Evil", "LossAbove", source_s3_uri=f"s3://{BUCKET}/jobs/evil/rule.py")
    outcome = runner.evaluate("evil", f"s3://{BUCKET}/jobs/evil", StepFiles(0, ("worker_0",)), rule)
    assert outcome.error is not None
    assert "outside the allowed prefixes" in outcome.error


# -- the reply is hostile: through the production transport (a real Lambda client) ---------------------
def _moto_runner(monkeypatch: pytest.MonkeyPatch, role: str, reply: str) -> Any:
    """A runner whose Invoke is answered by moto's Docker-free Lambda with ``reply`` as the payload.

    moto's simple Lambda backend returns queued results instead of running code (no Docker here);
    it cannot send a function error, a throttle or bytes that are not UTF-8: those cases use
    botocore's Stubber below, on the same client and transport."""
    from moto.core.config import default_user_config
    from moto.moto_api._internal.models import moto_api_backend

    monkeypatch.setitem(default_user_config, "lambda", {**default_user_config["lambda"], "use_docker": False})
    moto_api_backend.set_lambda_simple_result(reply, account_id="123456789012", region="us-east-1")
    return LambdaCustomRuleRunner(FUNCTION, role, invoke=lambda_invoke(FUNCTION, client=client("lambda")))


def _runner(role: str, response: dict[str, Any] | None = None, error: tuple[str, int] | None = None) -> Any:
    lam = client("lambda")
    stub = Stubber(lam)
    params = {"FunctionName": FUNCTION, "InvocationType": "RequestResponse", "Payload": ANY}
    if error is not None:
        stub.add_client_error(
            "invoke", service_error_code=error[0], http_status_code=error[1], expected_params=params
        )
    else:
        stub.add_response("invoke", response, expected_params=params)
    stub.activate()
    return LambdaCustomRuleRunner(FUNCTION, role, invoke=lambda_invoke(FUNCTION, client=lam))


def _reply(payload: bytes, function_error: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"StatusCode": 200, "Payload": StreamingBody(io.BytesIO(payload), len(payload))}
    if function_error:
        out["FunctionError"] = function_error
    return out


def _evaluate(runner: LambdaCustomRuleRunner) -> StepOutcome:
    rule = RuleConfig("LossAbove", "LossAbove", source_s3_uri=SOURCE)
    return runner.evaluate("job", f"s3://{BUCKET}/jobs/job", StepFiles(4, ("worker_0",)), rule)


GOOD = {
    "kind": "fired",
    "mode": "TRAIN",
    "mode_step": 4,
    "details": "d",
    "values": {"a": 1},
    "latency_ms": 1.0,
}


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (json.dumps({**GOOD, "details": "x" * (70 * 1024)}).encode(), "larger than"),
        (b"\xff\xfe not json", "not JSON"),
        (b"[1, 2]", "not an object"),
        (b"[" * 60_000, "not JSON"),
        (json.dumps({**GOOD, "kind": "pwned"}).encode(), "unknown outcome kind"),
        (json.dumps({**GOOD, "details": 5}).encode(), "'details' must be a string"),
        (json.dumps({**GOOD, "values": [1]}).encode(), "'values' an object"),
        (json.dumps({**GOOD, "mode_step": True}).encode(), "'mode_step'"),
        (json.dumps({**GOOD, "mode_step": 10**30}).encode(), "out of range"),
        (json.dumps({**GOOD, "latency_ms": "fast"}).encode(), "'latency_ms'"),
        (json.dumps({"kind": "error"}).encode(), "needs a string 'reason'"),
    ],
)
def test_a_malformed_reply_is_the_rules_error_at_that_step(stack, monkeypatch, payload, why) -> None:
    role = _setup(monkeypatch)
    try:
        runner = _moto_runner(monkeypatch, role, payload.decode())
    except UnicodeDecodeError:  # moto sends text only
        runner = _runner(role, _reply(payload))
    outcome = _evaluate(runner)
    assert outcome.error is not None
    assert "reply was refused" in outcome.error
    assert why in outcome.error
    assert (outcome.rule_name, outcome.step, outcome.fired) == ("LossAbove", 4, False)


def test_a_reply_is_clipped_and_capped_like_an_in_process_rules(stack, monkeypatch) -> None:
    big = {**GOOD, "details": "d" * 5000, "values": {"v": "x" * 40_000}}
    outcome = _evaluate(_moto_runner(monkeypatch, _setup(monkeypatch), json.dumps(big)))
    assert outcome.fired
    assert outcome.error is None
    assert len(outcome.details) <= 1024
    assert outcome.values["values_truncated"] is True
    assert len(json.dumps(outcome.values)) < 16 * 1024


def test_a_function_error_is_the_rules_error_at_that_step(stack, monkeypatch) -> None:
    body = json.dumps(
        {"errorType": "Sandbox.Timedout", "errorMessage": "Task timed out after 120.00 seconds"}
    )
    outcome = _evaluate(_runner(_setup(monkeypatch), _reply(body.encode(), function_error="Unhandled")))
    assert outcome.error is not None
    assert "the rule sandbox failed (Unhandled): Sandbox.Timedout: Task timed out" in outcome.error


@pytest.mark.parametrize(("code", "status"), [("TooManyRequestsException", 429), ("ServiceException", 500)])
def test_a_throttled_or_failing_invoke_keeps_the_step_pending(stack, monkeypatch, code, status) -> None:
    with pytest.raises(TransientError, match="invoking the rule sandbox"):
        _evaluate(_runner(_setup(monkeypatch), error=(code, status)))


def test_a_missing_sandbox_function_is_not_blamed_on_the_rule(stack, monkeypatch) -> None:
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        _evaluate(_runner(_setup(monkeypatch), error=("ResourceNotFoundException", 404)))


def test_a_transient_reply_keeps_the_step_pending(stack, monkeypatch) -> None:
    reply = json.dumps({"kind": "transient", "reason": "SlowDown reading step 4"}).encode()
    with pytest.raises(TransientError, match="SlowDown reading step 4"):
        _evaluate(_moto_runner(monkeypatch, _setup(monkeypatch), reply.decode()))


def test_the_evaluator_built_from_env_chooses_the_runner(stack, monkeypatch) -> None:
    assert Evaluator.from_env(HandlerEnv.from_environ()).runner.custom_rules is None
    monkeypatch.setenv(ENV_CUSTOM_RULE_FUNCTION, FUNCTION)
    with pytest.raises(ConfigurationError, match=ENV_CUSTOM_RULE_READER_ROLE):
        HandlerEnv.from_environ()
    monkeypatch.setenv(ENV_CUSTOM_RULE_READER_ROLE, "arn:aws:iam::123456789012:role/reader")
    runner = Evaluator.from_env(HandlerEnv.from_environ()).runner.custom_rules
    assert isinstance(runner, LambdaCustomRuleRunner)
    assert (runner.function_name, runner.reader_role_arn) == (
        FUNCTION,
        "arn:aws:iam::123456789012:role/reader",
    )


# -- the rule runs in a forked child: nothing it does stays in the sandbox's process ------------------
LEAVES_BEHIND = b"""
import builtins, os, signal, subprocess
from smdebug.rules.rule import Rule


class LeavesBehind(Rule):
    def __init__(self, base_trial, how="patch"):
        super().__init__(base_trial)
        self.how = how

    def invoke_at_step(self, step):
        if self.how == "patch":  # what a hostile rule would do to see the next job's credentials
            builtins.TORNASOLE_LEFT_BEHIND = True
            import tornasole.lambda_support.handlers.custom_rule as sandbox
            sandbox.scoped_storage = None
            return False
        if self.how == "loop":
            while True:
                pass
        if self.how == "exit":
            os._exit(3)
        if self.how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.how == "spawn":
            proc = subprocess.Popen(["sleep", "60"])
            raise RuntimeError("SPAWNED %d" % proc.pid)
"""


def _leaves_behind(
    monkeypatch: pytest.MonkeyPatch, lambda_context: Any, how: str, remaining_s: Any = None
) -> StepOutcome:
    role = _setup(monkeypatch)
    client("s3").put_object(Bucket=BUCKET, Key="custom-rules/leaves.py", Body=LEAVES_BEHIND)
    runner = LambdaCustomRuleRunner(FUNCTION, role, invoke=_sandbox(lambda_context))
    trial = f"s3://{BUCKET}/jobs/leaver"
    rule = RuleConfig("Leaves", "LeavesBehind", {"how": how}, source_s3_uri=f"{RULES}/leaves.py")
    return runner.evaluate("leaver", trial, StepFiles(0, ("worker_0",)), rule, remaining_s=remaining_s)


def test_what_a_rule_leaves_in_its_process_never_reaches_the_sandboxs(
    stack, monkeypatch, lambda_context
) -> None:
    import builtins

    stack.write_collections(trial=f"s3://{BUCKET}/jobs/leaver")
    stack.write_step(0, trial=f"s3://{BUCKET}/jobs/leaver")
    outcome = _leaves_behind(monkeypatch, lambda_context, "patch")
    assert outcome.error is None
    assert outcome.step_error is None
    assert not hasattr(builtins, "TORNASOLE_LEFT_BEHIND")
    assert callable(custom_rule.scoped_storage)


@pytest.mark.parametrize(
    ("how", "why"), [("exit", "ended without a verdict (status 3)"), ("kill", "(signal 9)")]
)
def test_a_rule_that_ends_its_process_is_its_error(stack, monkeypatch, lambda_context, how, why) -> None:
    stack.write_collections(trial=f"s3://{BUCKET}/jobs/leaver")
    stack.write_step(0, trial=f"s3://{BUCKET}/jobs/leaver")
    outcome = _leaves_behind(monkeypatch, lambda_context, how)
    assert outcome.error is not None
    assert why in outcome.error


def test_processes_a_rule_starts_are_stopped_with_it(stack, monkeypatch, lambda_context) -> None:
    stack.write_collections(trial=f"s3://{BUCKET}/jobs/leaver")
    stack.write_step(0, trial=f"s3://{BUCKET}/jobs/leaver")
    outcome = _leaves_behind(monkeypatch, lambda_context, "spawn")
    assert outcome.error is not None
    pid = int(outcome.error.split("SPAWNED ", 1)[1].split()[0])
    # SIGKILL is sent before the evaluator returns but acts when the kernel next schedules the
    # process, which on a busy machine can be a moment later: wait for that, within 5 s.
    deadline, state = time.monotonic() + 5.0, "R"
    while True:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            state = "gone"
        if state in ("gone", "Z", "X") or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert state in ("gone", "Z", "X")  # killed (a zombie until its new parent reaps it)


def test_the_rules_deadline_in_the_sandbox_is_cut_to_the_evaluators_remaining_time(
    stack, monkeypatch, lambda_context
) -> None:
    """The evaluator has 18.5 s left: 2 s go to the round trip, the sandbox keeps its 15 s reserve,
    so the looping rule is stopped within 1.5 s (not after the sandbox's own minute)."""
    stack.write_collections(trial=f"s3://{BUCKET}/jobs/leaver")
    stack.write_step(0, trial=f"s3://{BUCKET}/jobs/leaver")
    outcome = _leaves_behind(monkeypatch, lambda_context, "loop", remaining_s=lambda: 18.5)
    assert outcome.error is not None
    deadline = float(outcome.error.split("stopped after its deadline of ", 1)[1].rstrip("s"))
    assert 0.1 <= deadline <= 1.5  # what was left of the 1.5 s when the rule started
    assert outcome.latency_ms < 10_000


def test_in_lambda_rules_run_in_children_of_a_zygote_forked_before_any_request(
    stack, monkeypatch, lambda_context
) -> None:
    """In Lambda the sandbox forks a zygote at cold start and each rule runs in a child of it, so a
    rule's process holds its own request only (a child of the handler would copy earlier ones)."""
    import builtins

    trial = f"s3://{BUCKET}/jobs/leaver"
    stack.write_collections(trial=trial)
    stack.write_step(0, trial=trial)
    role = _setup(monkeypatch)
    client("s3").put_object(Bucket=BUCKET, Key="custom-rules/leaves.py", Body=LEAVES_BEHIND)
    assert custom_rule._start_zygote({}) is None  # local mode and tests: a child forked per request
    assert custom_rule._start_zygote({"AWS_LAMBDA_FUNCTION_NAME": "f", custom_rule.ENV_FORK: "0"}) is None
    zygote = custom_rule._start_zygote({"AWS_LAMBDA_FUNCTION_NAME": "tornasole-custom-rule"})
    assert zygote is not None  # forked now, after the data above exists: its children see this moto state
    monkeypatch.setattr(custom_rule, "_ZYGOTE", zygote)
    try:
        runner = LambdaCustomRuleRunner(FUNCTION, role, invoke=_sandbox(lambda_context))
        files = StepFiles(0, ("worker_0",))
        patch = RuleConfig("Leaves", "LeavesBehind", {"how": "patch"}, source_s3_uri=f"{RULES}/leaves.py")
        outcome = runner.evaluate("leaver", trial, files, patch)
        assert (outcome.error, outcome.step_error) == (None, None)
        assert not hasattr(builtins, "TORNASOLE_LEFT_BEHIND")
        exits = RuleConfig("Leaves", "LeavesBehind", {"how": "exit"}, source_s3_uri=f"{RULES}/leaves.py")
        outcome = runner.evaluate("leaver", trial, files, exits)
        assert outcome.error is not None
        assert "ended without a verdict (status 3)" in outcome.error
    finally:
        zygote.stop()

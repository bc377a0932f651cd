"""A short life of a few jobs through the real handlers on moto, every AWS call recorded.

It walks each code path a deployed function takes: on_object_created registers a job from its
file, evaluates steps (a built-in rule, and a custom rule run by the rule sandbox: the real
``functions/custom_rule`` handler, reached through the evaluator's own Lambda client, whose
``Invoke`` is answered in-process since moto runs functions only in Docker), holds an early
step as an orphan, and completes on the end marker; sagemaker_state_change completes a job on
SageMaker's own event; publish_events sends the outbox's events, an e-mail action, a stop
signal and a capture request; scheduled_check fires a stalled rule, re-evaluates a pending
step, completes a job and re-sends events the stream never published.
"""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.response import StreamingBody
from moto import mock_aws

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "evaluator"))

from aws_calls import CallRecorder  # noqa: E402
from evaluator_stack import BUCKET, Stack, load_event, load_handler  # noqa: E402

from tornasole.aws.clients import client  # noqa: E402
from tornasole.evaluator.sandbox.rule_runners import INVOKE_READ_TIMEOUT_S  # noqa: E402
from tornasole.jobs import Rule, TornasoleJobs  # noqa: E402
from tornasole.local.resources import create_resources  # noqa: E402
from tornasole.stack_spec import (  # noqa: E402
    DEFAULT_SPEC,
    ENV_CUSTOM_RULE_FUNCTION,
    ENV_CUSTOM_RULE_READER_ROLE,
    ENV_CUSTOM_RULES_PREFIX,
    ENV_TRIAL_PREFIX,
)

__all__ = ["RULES_PREFIX", "TRIAL_PREFIX", "recorded_run"]

# The deployed stack's default prefixes (the synthesized template the calls are checked against).
TRIAL_PREFIX = "trials/"
RULES_PREFIX = "custom-rules/"
TRIAL = f"s3://{BUCKET}/{TRIAL_PREFIX}my-job"
FILE_TRIAL = f"s3://{BUCKET}/{TRIAL_PREFIX}from-file"
STALLED_TRIAL = f"s3://{BUCKET}/{TRIAL_PREFIX}stalled"
REFUSED_TRIAL = f"s3://{BUCKET}/{TRIAL_PREFIX}refused"
LATE_TRIAL = f"s3://{BUCKET}/{TRIAL_PREFIX}late"
SAGEMAKER_TRIAL = f"s3://{BUCKET}/{TRIAL_PREFIX}on-sagemaker"
ACTIONS = json.dumps(
    [
        {"name": "email", "endpoint": "ml@example.com"},
        {"name": "stoptraining"},
        {"name": "capture", "steps": "5", "collections": "gradients"},
    ]
)

LOSS_ABOVE = b"""
from smdebug.rules.rule import Rule


class LossAbove(Rule):
    def __init__(self, base_trial, threshold="0.5"):
        super().__init__(base_trial)
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        return float(self.base_trial.tensor("loss").value(step).mean()) > self.threshold


class LossAboveOther(LossAbove):
    # compares with another trial (listed at the step: the sandbox's s3:ListBucket)

    def __init__(self, base_trial, other_trials=None, threshold="0.5"):
        super().__init__(base_trial, threshold)
        self.other_trials = other_trials or []
"""
SANDBOX = "tornasole-custom-rule"


VG = {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"threshold": "0.001"}}


class LambdaContext:
    """What Powertools reads from a Lambda context."""

    function_name = "tornasole-test"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:tornasole-test"
    aws_request_id = "00000000-0000-0000-0000-000000000000"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def _vg(**params: str) -> Rule:
    base = {"DebugRuleConfiguration": {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {}}}
    return Rule.sagemaker(base, rule_parameters={"threshold": "0.001", **params})


def _deliver_all(stack: Stack, recorder: CallRecorder) -> list[dict[str, Any]]:
    results = []
    for note in stack.notifications():
        with recorder.calls_of("on_object_created"):
            results.extend(stack.deliver(note)["results"])
    return results


def _answer_invokes_with_the_sandbox(recorder: CallRecorder, context: Any) -> list[dict[str, Any]]:
    """The evaluator's Lambda client: its ``Invoke`` runs the sandbox handler here, its calls recorded
    as ``custom_rule``'s (they are signed with the reader role's credentials). Returns the replies."""
    sandbox = load_handler("custom_rule")
    replies: list[dict[str, Any]] = []

    def answer(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        with recorder.calls_of("custom_rule"):
            replies.append(sandbox.handler(json.loads(params["body"]), context))
            reply = json.dumps(replies[-1]).encode()
        body = StreamingBody(io.BytesIO(reply), len(reply))
        return AWSResponse("https://lambda.invalid", 200, {}, None), {"StatusCode": 200, "Payload": body}

    lam = client("lambda", read_timeout=INVOKE_READ_TIMEOUT_S)
    lam.meta.events.register("before-call.lambda.Invoke", answer)
    return replies


def _run(stack: Stack, recorder: CallRecorder) -> None:
    replies = _answer_invokes_with_the_sandbox(recorder, stack.context)
    client("s3").put_object(Bucket=BUCKET, Key=f"{RULES_PREFIX}loss_above.py", Body=LOSS_ABOVE)
    custom = Rule.custom(
        "LossAbove", source=f"s3://{BUCKET}/{RULES_PREFIX}loss_above.py", rule_to_invoke="LossAbove"
    )
    # A registrant (the CLI/API, not a function) registers a job with actions and a custom rule.
    TornasoleJobs().register_job("my-job", TRIAL, [_vg(action_json=ACTIONS), custom])
    # on_object_created evaluates its steps and sees the end marker; publish_events sends its events,
    # the e-mail action, the capture request and the stop signal.
    stack.write_collections(trial=TRIAL)
    stack.write_step(0, loss=0.1, trial=TRIAL)
    stack.write_step(5, grad=1e-6, loss=0.9, trial=TRIAL)
    stack.write_end(trial=TRIAL)
    _deliver_all(stack, recorder)
    with recorder.calls_of("publish_events"):
        stack.pump_stream()

    # A step that arrives before its job's file (an orphan), then the file: a registration by a
    # data writer, built-in rules only. Its events are left for the schedule to re-send.
    stack.write_collections(trial=FILE_TRIAL)
    stack.write_step(0, grad=1e-6, trial=FILE_TRIAL)
    _deliver_all(stack, recorder)
    rule = {**VG, "RuleParameters": {**VG["RuleParameters"], "action_json": ACTIONS}}
    stack.put_job_config(
        {"TrainingJobName": "from-file", "DebugRuleConfigurations": [rule]}, trial=FILE_TRIAL
    )
    _deliver_all(stack, recorder)
    # A job file naming rule code: refused, the failure recorded (a data writer cannot run code).
    code = {"RuleConfigurationName": "Mine", "RuleParameters": {"source_s3_uri": f"s3://{BUCKET}/x.py"}}
    stack.put_job_config(
        {"TrainingJobName": "refused", "DebugRuleConfigurations": [code]}, trial=REFUSED_TRIAL
    )
    (refused,) = _deliver_all(stack, recorder)
    assert refused["action"] == "invalid", refused
    # A step written before its job was registered through the API: left pending for the schedule.
    stack.write_collections(trial=LATE_TRIAL)
    stack.write_step(0, trial=LATE_TRIAL)
    _deliver_all(stack, recorder)
    compares = Rule.custom(
        "LossAboveOther",
        source=f"s3://{BUCKET}/{RULES_PREFIX}loss_above.py",
        rule_to_invoke="LossAboveOther",
        other_trials_s3_input_paths=[TRIAL],
    )
    TornasoleJobs().register_job("late", LATE_TRIAL, [_vg(), compares])
    # its training ends; the step still pending, the schedule completes it (and writes its report)
    stack.write_end(trial=LATE_TRIAL)
    _deliver_all(stack, recorder)
    stalled = Rule.sagemaker(
        {"DebugRuleConfiguration": {"RuleConfigurationName": "StalledTrainingRule", "RuleParameters": {}}},
        rule_parameters={"threshold": "60"},
    )
    TornasoleJobs().register_job("stalled", STALLED_TRIAL, [stalled])

    # A job trained on SageMaker: no end marker; SageMaker's own event ends it (sagemaker_state_change).
    TornasoleJobs().register_job("on-sagemaker", SAGEMAKER_TRIAL, [_vg()])
    stack.write_collections(trial=SAGEMAKER_TRIAL)
    stack.write_step(0, trial=SAGEMAKER_TRIAL)
    _deliver_all(stack, recorder)
    ended = {
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "detail": {"TrainingJobName": "on-sagemaker", "TrainingJobStatus": "Completed"},
    }
    with recorder.calls_of("sagemaker_state_change"):
        result = load_handler("sagemaker_state_change").handler(ended, stack.context)
    assert result["action"] == "completed", result

    # scheduled_check an hour later: re-sends what the stream never published, re-evaluates the
    # pending step, fires the stalled rule.
    stack.scheduled.evaluator().clock = lambda: time.time() + 3600
    with recorder.calls_of("scheduled_check"):
        stack.scheduled.handler(load_event("schedule.json"), stack.context)
    with recorder.calls_of("publish_events"):
        stack.pump_stream()
    # every custom rule ran in the sandbox, on both evaluating paths, and none of them failed there
    assert sorted({r["kind"] for r in replies}) == ["fired", "no_issue"], replies
    assert len(replies) == 3, replies  # my-job's two steps (on_object_created), late's step (the schedule)


def _reader_role() -> str:
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
    }
    return client("iam").create_role(RoleName="reader", AssumeRolePolicyDocument=json.dumps(trust))["Role"][
        "Arn"
    ]


@pytest.fixture(scope="module")
def recorded_run() -> Iterator[tuple[CallRecorder, Stack]]:
    mp = pytest.MonkeyPatch()
    mp.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
    try:
        with mock_aws():
            res = create_resources(BUCKET, DEFAULT_SPEC)
            for name, value in {
                "TORNASOLE_STATE_TABLE": res.table,
                "TORNASOLE_EVENT_BUS": res.bus,
                "TORNASOLE_EVENT_SOURCE": DEFAULT_SPEC.bus.source,
                "TORNASOLE_ALERT_TOPIC_ARN": res.topic_arn,
                "TORNASOLE_TRIAL_BUCKET": res.bucket,
                ENV_TRIAL_PREFIX: TRIAL_PREFIX,
                ENV_CUSTOM_RULES_PREFIX: f"s3://{BUCKET}/{RULES_PREFIX}",
                ENV_CUSTOM_RULE_FUNCTION: SANDBOX,
                ENV_CUSTOM_RULE_READER_ROLE: _reader_role(),
                # the sandbox's calls are recorded in this process: no forked child per rule run
                "TORNASOLE_SANDBOX_FORK": "0",
                "POWERTOOLS_TRACE_DISABLED": "true",
            }.items():
                mp.setenv(name, value)
            stack = Stack(res, LambdaContext())
            stack.notifications()
            recorder = CallRecorder()
            with recorder.installed():
                _run(stack, recorder)
            yield recorder, stack
    finally:
        mp.undo()

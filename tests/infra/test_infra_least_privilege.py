"""Each function's role holds exactly what its code calls: proven by running the handlers.

``handler_run`` drives the three real handlers through every path a deployed function takes, on
moto, recording each AWS call as the IAM action (and key) AWS authorizes it by. Against the
synthesized template (default prefixes, the ones the run uses), each function's role must:

* allow every recorded action, on a resource that covers the recorded key (S3 object keys match
  the statement's prefix, S3 list prefixes its ``s3:prefix`` condition, DynamoDB partition keys its
  ``dynamodb:LeadingKeys`` condition, GSI queries the index ARN);
* hold no action, no S3 prefix and no partition-key shape that the run never used, except the few
  the platform itself uses on the function's behalf (:data:`PLATFORM`).
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from typing import Any

import pytest
from aws_calls import AwsCall, CallRecorder
from handler_run import recorded_run  # noqa: F401  (the module-scoped fixture)

from tornasole.stack_spec import DEFAULT_SPEC

# Used by AWS on the function's behalf, never by its code: the stream event source mapping reads
# the stream with the consumer's role; the on-failure destination sends with it; logs and X-Ray are
# the runtime's. They are covered by test_infra_iam's resource checks instead.
STREAM_READS = {
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
}
PLATFORM = STREAM_READS | {
    "sqs:SendMessage",
    "sqs:GetQueueAttributes",
    "sqs:GetQueueUrl",
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
}
FUNCTIONS = {  # handler -> a phrase of its function's description in stack_spec
    "on_object_created": DEFAULT_SPEC.on_object_created.description,
    "publish_events": DEFAULT_SPEC.publish_events.description,
    "scheduled_check": DEFAULT_SPEC.scheduled_check.description,
    "sagemaker_state_change": DEFAULT_SPEC.sagemaker_state_change.description,
    # the rule sandbox's calls are signed with the reader role's session: checked against that role
    # (its own execution role holds its log group only: test_infra_rule_sandbox)
    "custom_rule": DEFAULT_SPEC.custom_rule.description,
}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _statements(synth: Any, function: str) -> list[dict[str, Any]]:
    resources = synth.json["Resources"]
    (fn,) = [
        r
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Description") == FUNCTIONS[function]
    ]
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    if function == "custom_rule":
        role = synth.stack.get_logical_id(synth.stack.rule_sandbox.reader.node.default_child)
    return [
        st
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
        for st in r["Properties"]["PolicyDocument"]["Statement"]
        if st["Effect"] == "Allow"
    ]


def _granting(statements: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [st for st in statements if action in _as_list(st["Action"])]


def _object_patterns(st: dict[str, Any]) -> list[str]:
    """``/prefix*`` of each ``<bucket ARN>/prefix*`` resource of an S3 object statement."""
    return [r["Fn::Join"][1][-1] for r in _as_list(st["Resource"]) if "Fn::Join" in r]


def _leading_keys(st: dict[str, Any]) -> list[str]:
    return st["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]


def _is_table(synth: Any, resource: Any) -> bool:
    table = synth.stack.get_logical_id(synth.stack.state.table.node.default_child)
    return resource == {"Fn::GetAtt": [table, "Arn"]}


def _is_index(synth: Any, resource: Any) -> bool:
    text = json.dumps(resource)
    return "Fn::Join" in text and resource["Fn::Join"][1][-1] == f"/index/{DEFAULT_SPEC.table.gsi.name}"


def _allows(synth: Any, statements: list[dict[str, Any]], call: AwsCall) -> bool:
    """Whether one statement of the role allows ``call`` on its resource."""
    for st in _granting(statements, call.action):
        if call.action in PLATFORM:
            return True
        if call.action == "s3:ListBucket":
            if any(fnmatchcase(call.resource or "", p) for p in st["Condition"]["StringLike"]["s3:prefix"]):
                return True
        elif call.action.startswith("s3:"):
            if any(fnmatchcase(f"/{call.resource}", p) for p in _object_patterns(st)):
                return True
        elif call.action.startswith("dynamodb:"):
            if call.index is not None:
                if _is_index(synth, st["Resource"]):
                    return True
            elif _is_table(synth, st["Resource"]) and any(
                fnmatchcase(call.resource or "", p) for p in _leading_keys(st)
            ):
                return True
        else:  # PutEvents on the bus, Publish on the topic, the reader role, the sandbox: exact ARNs
            # (test_infra_iam, test_infra_rule_sandbox)
            return True
    return False


#: What publishing to a KMS-encrypted topic takes besides sns:Publish: SNS makes these calls to the
#: topics' key with the publisher's credentials, so no client call of the function records them
#: (their resource, the one key: test_infra_writer_isolation).
ENCRYPTED_TOPIC_KEY_USE = frozenset({"kms:Decrypt", "kms:GenerateDataKey*"})


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_every_call_a_function_makes_is_allowed_by_its_role(synth, recorded_run, function) -> None:  # noqa: F811
    recorder: CallRecorder = recorded_run[0]
    statements = _statements(synth, function)
    calls = [c for c in recorder.calls if c.function == function]
    assert calls, function
    denied = sorted(
        {(c.action, c.resource, c.index) for c in calls if not _allows(synth, statements, c)}, key=str
    )
    assert denied == []


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_a_role_holds_no_action_its_function_never_calls(synth, recorded_run, function) -> None:  # noqa: F811
    recorder: CallRecorder = recorded_run[0]
    granted = {a for st in _statements(synth, function) for a in _as_list(st["Action"])}
    platform = PLATFORM if function == "publish_events" else PLATFORM - STREAM_READS
    if "sns:Publish" in granted:  # SNS calls KMS with the publisher's credentials (encrypted topics)
        platform = platform | ENCRYPTED_TOPIC_KEY_USE
    assert granted - platform - recorder.actions(function) == set()
    assert recorder.actions(function) - STREAM_READS <= granted


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_every_prefix_and_key_shape_a_role_is_scoped_to_is_used(synth, recorded_run, function) -> None:  # noqa: F811
    """Scoped, and no wider than used: each S3 prefix and each partition-key shape of a statement is
    touched by one of the statement's actions."""
    recorder: CallRecorder = recorded_run[0]
    for st in _statements(synth, function):
        actions = [a for a in _as_list(st["Action"]) if a not in PLATFORM]
        if not actions or actions[0].split(":")[0] in ("events", "sns", "sts", "lambda", "kms"):
            continue  # one exact ARN each (bus, topic, reader role, sandbox): test_infra_iam, _rule_sandbox
        used = [c for a in actions for c in recorder.of(function, a)]
        if actions == ["s3:ListBucket"]:
            patterns = st["Condition"]["StringLike"]["s3:prefix"]
            keys = [c.resource or "" for c in used]
        elif actions[0].startswith("s3:"):
            patterns = _object_patterns(st)
            keys = [f"/{c.resource}" for c in used]
        elif _is_index(synth, st["Resource"]):
            assert any(c.index for c in used), (function, actions)
            continue
        else:
            patterns = _leading_keys(st)
            keys = [c.resource or "" for c in used if c.index is None]
        for pattern in patterns:
            assert any(fnmatchcase(k, pattern) for k in keys), (function, actions, pattern)

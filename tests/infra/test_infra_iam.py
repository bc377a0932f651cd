"""Least privilege: no wildcard actions; resources scoped to this stack's prefixes, table, bus, topic."""

from __future__ import annotations

import json
from typing import Any

# The only actions AWS does not let you scope to a resource (so they carry Resource "*").
UNSCOPABLE = {"xray:PutTraceSegments", "xray:PutTelemetryRecords", "dynamodb:ListStreams"}
# Lambda attaching the rule sandbox to its VPC (``infra/constructs/rule_sandbox.py``)
UNSCOPABLE |= {
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
}


def _statements(synth) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for lid, res in synth.resources("AWS::IAM::Policy").items():
        for st in res["Properties"]["PolicyDocument"]["Statement"]:
            out.append((lid, st))
    return out


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _role_policies(synth, function_description: str) -> list[dict[str, Any]]:
    """The statements of the role of our function whose description contains ``function_description``."""
    resources = synth.json["Resources"]
    fn = next(
        r
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::Function"
        and function_description in r["Properties"].get("Description", "")
    )
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    return [
        st
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
        for st in r["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statements: list[dict[str, Any]]) -> set[str]:
    return {a for st in statements for a in _as_list(st["Action"])}


def test_no_statement_allows_every_action(synth, imported) -> None:
    for s in (synth, imported):
        for lid, st in _statements(s):
            for action in _as_list(st["Action"]):
                assert action != "*", lid
                assert not action.endswith(":*"), f"{lid}: {action}"


def test_resource_star_only_for_actions_aws_cannot_scope(synth, imported) -> None:
    for s in (synth, imported):
        for lid, st in _statements(s):
            if "*" in _as_list(st["Resource"]):
                assert set(_as_list(st["Action"])) <= UNSCOPABLE, f"{lid}: {st}"


def test_our_roles_use_no_managed_policies(synth) -> None:
    resources = synth.json["Resources"]
    roles = {
        fn["Properties"]["Role"]["Fn::GetAtt"][0]
        for fn in resources.values()
        if fn["Type"] == "AWS::Lambda::Function" and fn["Properties"].get("Runtime") == "python3.12"
    }
    assert len(roles) == 5  # one role per function, the rule sandbox's included
    for role in roles:
        assert not resources[role]["Properties"].get("ManagedPolicyArns"), role


def test_events_put_only_on_our_bus_and_only_by_the_outbox_publishers(synth) -> None:
    bus = next(iter(synth.resources("AWS::Events::EventBus")))
    for lid, st in _statements(synth):
        if "events:PutEvents" in _as_list(st["Action"]):
            assert st["Resource"] == {"Fn::GetAtt": [bus, "Arn"]}, lid
    assert "events:PutEvents" in _actions(_role_policies(synth, "DynamoDB stream"))
    assert "events:PutEvents" in _actions(_role_policies(synth, "Schedule:"))
    # on_object_created only writes state (transactional outbox); it never publishes. Its one bucket
    # write is a finished job's report (test_writes_to_the_bucket_are_limited_to_stop_signals_and_reports).
    on_created = _actions(_role_policies(synth, "S3 ObjectCreated"))
    assert not {"events:PutEvents", "sns:Publish"} & on_created


def test_s3_reads_are_scoped_to_the_trial_and_custom_rule_prefixes(synth) -> None:
    scoped = set()
    for _, st in _statements(synth):
        if "s3:GetObject" not in _as_list(st["Action"]):
            continue
        for res in _as_list(st["Resource"]):
            text = json.dumps(res)
            if "Fn::Join" in text:
                scoped.add(res["Fn::Join"][1][-1])
    assert scoped == {"/trials/*", "/custom-rules/*"}


def test_writes_to_the_bucket_are_limited_to_stop_signals_capture_requests_and_reports(synth) -> None:
    allowed = {
        "/trials/*tornasole_stop_training.json",
        "/trials/*tornasole_capture/*.json",
        "/trials/*tornasole-report.html",
    }
    written = set()
    for lid, st in _statements(synth):
        if "s3:PutObject" in _as_list(st["Action"]):
            suffix = st["Resource"]["Fn::Join"][1][-1]
            assert suffix in allowed, lid
            written.add(suffix)
    assert written == allowed


def test_imported_buckets_are_scoped_by_name(imported) -> None:
    texts = [
        json.dumps(st["Resource"])
        for _, st in _statements(imported)
        if "s3:GetObject" in _as_list(st["Action"])
    ]
    assert any("s3:::my-training-output/debug/*" in t for t in texts)
    assert any("s3:::my-rules-bucket/tornasole/rules/*" in t for t in texts)


def test_no_topic_lets_a_service_principal_publish_without_a_source_condition(synth) -> None:
    """A topic policy granting ``events.amazonaws.com`` publish with no ``aws:SourceArn`` lets any
    account's EventBridge rule publish to our alert topics (the confused-deputy case)."""
    allowed = []
    for lid, res in synth.resources("AWS::SNS::TopicPolicy").items():
        for st in res["Properties"]["PolicyDocument"]["Statement"]:
            principal = st.get("Principal", {})
            services = _as_list(principal.get("Service", [])) if isinstance(principal, dict) else []
            if (
                st["Effect"] == "Allow"
                and services
                and "aws:SourceArn" not in json.dumps(st.get("Condition", {}))
            ):
                allowed.append((lid, st))
    assert not allowed, allowed


def test_the_status_rule_publishes_through_its_own_role_scoped_to_the_status_topic(synth) -> None:
    resources = synth.json["Resources"]
    rule = next(
        r
        for r in resources.values()
        if r["Type"] == "AWS::Events::Rule" and "status topic" in r["Properties"].get("Description", "")
    )
    (target,) = rule["Properties"]["Targets"]
    role = target["RoleArn"]["Fn::GetAtt"][0]
    statements = [
        st
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
        for st in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    publish = [st for st in statements if "sns:Publish" in _as_list(st["Action"])]
    assert _actions(publish) == {"sns:Publish"}
    assert all(st["Resource"] == target["Arn"] for st in publish)
    # and the encrypted topic's key, that key only (SNS uses it with the publisher's credentials)
    key_use = [st for st in statements if st not in publish]
    assert _actions(key_use) == {"kms:Decrypt", "kms:GenerateDataKey*"}
    assert all(st["Resource"]["Fn::GetAtt"][1] == "Arn" for st in key_use)
    assert {st["Resource"]["Fn::GetAtt"][0] for st in key_use} <= set(synth.resources("AWS::KMS::Key"))

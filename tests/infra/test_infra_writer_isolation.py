"""Issue #34 N7: rule code never under the trial prefix by configuration (refused before synthesis)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.config import ConfigError, StackConfig


@pytest.mark.parametrize(
    "context",
    [
        {"trial_prefix": "trials/", "custom_rules_prefix": "trials/rules/"},
        {"trial_prefix": "trials/rules/", "custom_rules_prefix": "trials/"},
        {"trial_prefix": "/", "custom_rules_prefix": "custom-rules/"},  # trials: the whole bucket
        {"trial_prefix": "data", "custom_rules_prefix": "data"},
        {
            "existing_bucket_name": "my-bucket",
            "trial_prefix": "debug/",
            "custom_rules_prefix": "s3://my-bucket/debug/rules/",
        },
    ],
)
def test_a_rules_prefix_inside_the_trials_is_refused(context: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="custom_rules_prefix=.* overlaps trial_prefix"):
        StackConfig.from_mapping(context)


@pytest.mark.parametrize(
    "context",
    [
        {},
        {"trial_prefix": "trials/", "custom_rules_prefix": "trials-rules/"},  # a sibling, not inside
        {"existing_bucket_name": "my-bucket", "trial_prefix": "", "custom_rules_prefix": "s3://rules-b/r/"},
    ],
)
def test_separate_prefixes_are_accepted(context: dict[str, str]) -> None:
    assert StackConfig.from_mapping(context).rules_prefix_overlap() is None


# --- infrastructure residue of the red-team run (CDK assertions on the synthesized template) ---


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_both_topics_are_encrypted_with_a_rotated_key_of_the_stack(synth) -> None:
    keys = synth.resources("AWS::KMS::Key")
    topics = synth.resources("AWS::SNS::Topic")
    assert len(topics) == 2
    for lid, topic in topics.items():
        ref = topic["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]
        assert ref in keys, lid
        assert keys[ref]["Properties"]["EnableKeyRotation"] is True


def test_every_publisher_may_use_the_topics_key_and_cloudwatch_too(synth) -> None:
    (key_id,) = [
        k
        for k, v in synth.resources("AWS::KMS::Key").items()
        if "alert topics" in v["Properties"]["Description"]
    ]
    key_arn = {"Fn::GetAtt": [key_id, "Arn"]}
    publishers, key_users = set(), set()
    for policy in synth.resources("AWS::IAM::Policy").values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        roles = {r["Ref"] for r in policy["Properties"]["Roles"]}
        if any("sns:Publish" in _as_list(st["Action"]) for st in statements):
            publishers |= roles
        if any(
            "kms:GenerateDataKey*" in _as_list(st["Action"]) and key_arn in _as_list(st["Resource"])
            for st in statements
        ):
            key_users |= roles
    assert publishers
    assert publishers <= key_users  # an encrypted topic refuses a publisher that cannot use its key
    key_policy = synth.resources("AWS::KMS::Key")[key_id]["Properties"]["KeyPolicy"]["Statement"]
    assert any(st.get("Principal") == {"Service": "cloudwatch.amazonaws.com"} for st in key_policy)


def test_the_trial_bucket_is_versioned_and_old_versions_expire(synth) -> None:
    (bucket,) = [
        b
        for b in synth.resources("AWS::S3::Bucket").values()
        if b["Properties"].get("NotificationConfiguration")
    ] or list(synth.resources("AWS::S3::Bucket").values())[:1]
    props = bucket["Properties"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    rules = {r["Id"]: r for r in props["LifecycleConfiguration"]["Rules"]}
    assert rules["expire-noncurrent-versions"]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}


def test_the_only_managed_policy_is_the_cdk_notifications_handlers_log_policy(synth) -> None:
    """docs/SECURITY.md says precisely which role holds a managed policy, and why; nothing else may."""
    from pathlib import Path

    roles = synth.resources("AWS::IAM::Role")
    managed = {
        lid: r["Properties"]["ManagedPolicyArns"]
        for lid, r in roles.items()
        if r["Properties"].get("ManagedPolicyArns")
    }
    assert list(managed) == [next(lid for lid in managed if lid.startswith("BucketNotificationsHandler"))]
    (arns,) = managed.values()
    assert len(arns) == 1
    assert "service-role/AWSLambdaBasicExecutionRole" in json.dumps(arns)
    security = (Path(__file__).resolve().parents[2] / "docs" / "SECURITY.md").read_text()
    assert "The one managed policy in the stack is `AWSLambdaBasicExecutionRole`" in security


def test_reserved_concurrency_is_a_knob_of_the_evaluating_function(synth) -> None:
    """FULL_CONTEXT sets ``reserved_concurrency``: the step evaluations are bounded by it."""
    reserved = [
        f["Properties"].get("ReservedConcurrentExecutions")
        for f in synth.resources("AWS::Lambda::Function").values()
        if "S3 ObjectCreated" in f["Properties"].get("Description", "")
    ]
    assert reserved == [20]

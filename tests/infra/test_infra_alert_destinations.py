"""Alert destinations in the template: API destinations and connections (the secret referenced, never
inlined), AWS Chatbot channels with no permissions, one bus rule per destination with EventBridge's
retries and the dead-letter queue; cdk-nag clean (the fixture synthesises with both packs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match

from infra.config import ConfigError, StackConfig
from tornasole.alerts.destinations import DETAIL_TYPE_ALERT

SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:tornasole/oncall-AbCdEf"
SLACK_SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:tornasole/slack-AbCdEf"


def _rule_for(synth, destination: str) -> dict[str, Any]:
    (rule,) = [
        r
        for r in synth.resources("AWS::Events::Rule").values()
        if r["Properties"].get("EventPattern", {}).get("detail", {}).get("Destination") == [destination]
    ]
    return rule


def _text(value: Any) -> str:
    return json.dumps(value)


def test_a_webhook_is_an_api_destination_with_the_secret_referenced(with_alert_destinations) -> None:
    synth = with_alert_destinations
    template = synth.json
    connections = synth.resources("AWS::Events::Connection")
    assert len(connections) == 2
    oncall = next(c for c in connections.values() if "oncall" in c["Properties"]["Description"])
    auth = oncall["Properties"]["AuthParameters"]["ApiKeyAuthParameters"]
    assert oncall["Properties"]["AuthorizationType"] == "API_KEY"
    assert auth["ApiKeyName"] == "Authorization"
    assert _text(auth["ApiKeyValue"]).startswith(f'"{{{{resolve:secretsmanager:{SECRET}:SecretString:token')
    # the URL of a Slack incoming webhook is a credential: a dynamic reference too
    destinations = synth.resources("AWS::Events::ApiDestination")
    endpoints = sorted(_text(d["Properties"]["InvocationEndpoint"]) for d in destinations.values())
    assert endpoints == [
        '"https://events.example.com/v2/enqueue"',
        f'"{{{{resolve:secretsmanager:{SLACK_SECRET}:SecretString:url::}}}}"',
    ]
    assert all(d["Properties"]["HttpMethod"] == "POST" for d in destinations.values())
    # nothing secret in the template: no token, no hooks.slack.com URL, only references
    assert "hooks.slack.com" not in json.dumps(template)
    assert not synth.resources("AWS::SecretsManager::Secret")


def test_each_webhook_rule_matches_its_alerts_only_with_retries_and_a_dlq(with_alert_destinations) -> None:
    synth = with_alert_destinations
    rule = _rule_for(synth, "webhook:oncall")
    assert rule["Properties"]["EventPattern"] == {
        "source": ["tornasole"],
        "detail-type": [DETAIL_TYPE_ALERT],
        "detail": {"Destination": ["webhook:oncall"]},
    }
    (target,) = rule["Properties"]["Targets"]
    assert target["InputPath"] == "$.detail.Alert"
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 8, "MaximumEventAgeInSeconds": 7200}
    assert "DeadLetterConfig" in target
    (slack_hook,) = _rule_for(synth, "webhook:slack-hook")["Properties"]["Targets"]
    assert slack_hook["InputPath"] == "$.detail.Slack"
    # the rule's role may invoke its own API destination and nothing else
    role = synth.json["Resources"][target["RoleArn"]["Fn::GetAtt"][0]]
    policies = [
        p
        for p in synth.resources("AWS::IAM::Policy").values()
        if {"Ref": target["RoleArn"]["Fn::GetAtt"][0]} in p["Properties"]["Roles"]
    ]
    statements = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]
    assert [s["Action"] for s in statements] == ["events:InvokeApiDestination"]
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "events.amazonaws.com"
    }


def test_chat_channels_are_chatbot_configurations_on_their_own_topics(with_alert_destinations) -> None:
    synth = with_alert_destinations
    synth.template.has_resource_properties(
        "AWS::Chatbot::SlackChannelConfiguration",
        {
            "SlackWorkspaceId": "T0123ABCD",
            "SlackChannelId": "C0123ABCD",
            "ConfigurationName": "tornasole-ml-team",
            "GuardrailPolicies": [Match.object_like({"Fn::Join": Match.any_value()})],
            "SnsTopicArns": [Match.any_value()],
        },
    )
    synth.template.has_resource_properties(
        "AWS::Chatbot::MicrosoftTeamsChannelConfiguration",
        {
            "TeamsTenantId": "11111111-2222-3333-4444-555555555555",
            "TeamId": "66666666-7777-8888-9999-000000000000",
            "TeamsChannelId": "19%3a0123abcd%40thread.tacv2",
            "GuardrailPolicies": [Match.object_like({"Fn::Join": Match.any_value()})],
        },
    )
    for config in [
        *synth.resources("AWS::Chatbot::SlackChannelConfiguration").values(),
        *synth.resources("AWS::Chatbot::MicrosoftTeamsChannelConfiguration").values(),
    ]:
        assert "AWSDenyAll" in json.dumps(config["Properties"]["GuardrailPolicies"])
        role = synth.json["Resources"][config["Properties"]["IamRoleArn"]["Fn::GetAtt"][0]]
        assert "ManagedPolicyArns" not in role["Properties"]  # the channel's role can do nothing
        assert "Policies" not in role["Properties"]
    for destination in ("slack:ml-team", "teams:ops"):
        (target,) = _rule_for(synth, destination)["Properties"]["Targets"]
        assert target["InputPath"] == "$.detail.Chatbot"
        assert target["RetryPolicy"]["MaximumRetryAttempts"] == 8
        topic = synth.json["Resources"][target["Arn"]["Ref"]]
        assert topic["Type"] == "AWS::SNS::Topic"
        assert "KmsMasterKeyId" in topic["Properties"]


def test_functions_accept_exactly_the_configured_destinations(with_alert_destinations, synth) -> None:
    expected = "slack:ml-team,teams:ops,webhook:oncall,webhook:slack-hook"
    for fn in with_alert_destinations.resources("AWS::Lambda::Function").values():
        env = fn["Properties"].get("Environment", {}).get("Variables", {})
        if "TORNASOLE_ALERT_TOPIC_ARN" in env:
            assert env["TORNASOLE_ALERT_DESTINATIONS"] == expected
    outputs = with_alert_destinations.json["Outputs"]
    assert outputs["AlertDestinationNames"]["Value"] == expected
    assert "TORNASOLE_ALERT_DESTINATIONS=" + expected in json.dumps(outputs["RegisterJobCommand"])
    # without destinations: none of these resources
    assert not synth.resources("AWS::Events::ApiDestination")
    assert not synth.resources("AWS::Chatbot::SlackChannelConfiguration")
    assert synth.json["Outputs"]["AlertDestinationNames"]["Value"] == "none"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("alert_webhooks", {"x": {"url": "http://plain.example/", "secret_arn": SECRET}}, "x.url="),
        ("alert_webhooks", {"x": {"url": "https://a.example/"}}, "x.secret_arn="),
        ("alert_webhooks", {"x": {"secret_arn": SECRET}}, "either url"),
        ("alert_webhooks", {"x": {"url": "https://a.example/", "secret_arn": SECRET, "token": "t"}}, "token"),
        (
            "alert_webhooks",
            {"https://a.example/": {"url": "https://a.example/", "secret_arn": SECRET}},
            "name",
        ),
        ("alert_webhooks", {"x": {"url": "https://a/", "secret_arn": SECRET, "format": "xml"}}, "x.format"),
        ("alert_slack_channels", {"s": {"workspace_id": "T1", "channel_id": "#general"}}, "s.channel_id"),
        ("alert_teams_channels", {"t": {"tenant_id": "x", "team_id": "y", "channel_id": "z"}}, "t.tenant_id"),
        ("alert_webhooks", "{not json", "not JSON"),
    ],
)
def test_a_bad_destination_stops_synthesis_naming_the_key(key: str, value: Any, message: str) -> None:
    text = value if isinstance(value, str) else json.dumps(value)
    with pytest.raises(ConfigError, match=f"--context {key}") as err:
        StackConfig.from_mapping({key: text})
    assert message in str(err.value)


def test_the_template_with_destinations_passes_cfn_lint(with_alert_destinations, tmp_path) -> None:
    template = tmp_path / "Tornasole.template.json"
    template.write_text(json.dumps(with_alert_destinations.json))
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    # W3005: the redundant DependsOn CDK itself generates
    proc = subprocess.run(
        [str(cfn_lint), str(template), "--ignore-checks", "W3005"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

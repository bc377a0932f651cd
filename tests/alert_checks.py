"""Checks every test that produces an alert runs on it: the body against EVENTS.md's schema, and each
rendering against its channel's documented limits (Slack Block Kit, Teams Adaptive Card, AWS Chatbot)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from tornasole.alerts.body import ALERT_SCHEMA

# https://api.slack.com/reference/block-kit/blocks: header text <= 150, section text <= 3000,
# at most 10 fields of <= 2000 each, at most 50 blocks per message
SLACK_HEADER, SLACK_TEXT, SLACK_FIELD, SLACK_FIELDS, SLACK_BLOCKS = 150, 3000, 2000, 10, 50


def assert_valid_alert(body: dict[str, Any]) -> None:
    """The documented alert body (docs/EVENTS.md "Alert body"), JSON-serialisable as it is."""
    jsonschema.Draft202012Validator.check_schema(ALERT_SCHEMA)
    jsonschema.validate(body, ALERT_SCHEMA, cls=jsonschema.Draft202012Validator)
    assert json.loads(json.dumps(body)) == body


def assert_valid_slack(message: dict[str, Any]) -> None:
    assert message["text"]
    blocks = message["blocks"]
    assert 0 < len(blocks) <= SLACK_BLOCKS
    for block in blocks:
        kind = block["type"]
        assert kind in ("header", "section", "context"), block
        if kind == "header":
            assert block["text"]["type"] == "plain_text"
            assert 0 < len(block["text"]["text"]) <= SLACK_HEADER
        elif kind == "section":
            assert "text" in block or "fields" in block
            if "text" in block:
                assert 0 < len(block["text"]["text"]) <= SLACK_TEXT
            for f in block.get("fields", []):
                assert f["type"] == "mrkdwn"
                assert 0 < len(f["text"]) <= SLACK_FIELD
            assert len(block.get("fields", [])) <= SLACK_FIELDS
        else:
            assert all(0 < len(e["text"]) <= SLACK_TEXT for e in block["elements"])


def assert_valid_teams(message: dict[str, Any]) -> None:
    assert message["type"] == "message"
    (attachment,) = message["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert card["type"] == "AdaptiveCard"
    assert card["version"] == "1.4"
    assert all(item["type"] in ("TextBlock", "FactSet") for item in card["body"])


def assert_valid_chatbot(notification: dict[str, Any]) -> None:
    # https://docs.aws.amazon.com/chatbot/latest/adminguide/custom-notifs.html
    assert notification["version"] == "1.0"
    assert notification["source"] == "custom"
    content = notification["content"]
    assert content["textType"] == "client-markdown"
    assert content["description"]
    assert content["title"]
    assert all(isinstance(s, str) for s in content["nextSteps"])


def assert_valid_alert_event_detail(detail: dict[str, Any]) -> None:
    """The detail of a ``Tornasole Alert`` event: the body and each of its renderings."""
    assert_valid_alert(detail["Alert"])
    assert_valid_slack(detail["Slack"])
    assert_valid_teams(detail["Teams"])
    assert_valid_chatbot(detail["Chatbot"])
    assert detail["TornasoleEventId"] == detail["Alert"]["TornasoleEventId"]


def check_every_alert(monkeypatch: Any) -> None:
    """Make every alert body built while a test runs pass :func:`assert_valid_alert` (an autouse
    fixture of the test directories whose runs produce alerts: the evaluator on moto, the local mode)."""
    import tornasole.alerts.body as body_module

    build = body_module.alert_body

    def checked(**kwargs: Any) -> dict[str, Any]:
        body = build(**kwargs)
        assert_valid_alert(body)
        return body

    monkeypatch.setattr(body_module, "alert_body", checked)

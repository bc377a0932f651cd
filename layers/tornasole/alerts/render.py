"""One alert body, four renderings: plain text (e-mail/SMS), Slack blocks, a Teams card, AWS Chatbot.

Each says the same facts as :func:`tornasole.alerts.body.alert_body`, in the shape its channel
accepts, within that channel's documented limits (Slack: a header of at most 150 characters, section
text of at most 3000, at most 10 fields of 2000 each; Teams: an Adaptive Card 1.4 in the message
shape Teams workflows accept; AWS Chatbot: its custom-notification schema, version 1.0).
"""

from __future__ import annotations

from typing import Any

from tornasole.rules.outcome import format_number

__all__ = ["chatbot_notification", "slack_message", "teams_message", "text_message"]

_SLACK_HEADER = 150
_SLACK_TEXT = 3000
_SLACK_FIELD = 2000


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _title(body: dict[str, Any]) -> str:
    prefix = "Reminder: " if body["Reminder"] else ""
    return f"{prefix}{body['RuleConfigurationName']} found issues in {body['TrainingJobName']}"


def _where(body: dict[str, Any]) -> str:
    if body["Step"] is None:
        return "the job as a whole"
    where = f"step {body['Step']}"
    if body["Mode"] is not None and body["ModeStep"] is not None:
        where += f" ({body['Mode']} {body['ModeStep']})"
    return where


def _numbers(body: dict[str, Any]) -> str | None:
    parts = []
    if body["Value"] is not None:
        parts.append(f"value {format_number(body['Value'])}")
    if body["Threshold"] is not None:
        parts.append(f"threshold {format_number(body['Threshold'])}")
    return ", ".join(parts) or None


def _advice_line(body: dict[str, Any]) -> str | None:
    cause, fix = body["LikelyCause"], body["SuggestedFix"]
    if not cause and not fix:
        return None
    return f"Likely cause: {cause or 'unknown'}. Suggested fix: {fix or 'see the rule documentation'}."


def _files(body: dict[str, Any]) -> str:
    files = body["StepFiles"]
    return _clip(", ".join(files["IndexFiles"]) or files["TrialPath"], 2000)


def text_message(body: dict[str, Any]) -> tuple[str, str]:
    """(subject, plain text) for e-mail and SMS: every fact of the body, one per line."""
    subject = _clip(f"Tornasole: {_title(body)}", 100)
    at = "" if body["Step"] is None else f" at {_where(body)}"
    lead = f"Rule {body['RuleConfigurationName']} found issues in training job {body['TrainingJobName']}{at}."
    if body["Reminder"]:
        lead = "Reminder (the rule is still firing): " + lead
    numbers = _numbers(body)
    tensor = body["Tensor"]
    lines = [
        lead,
        body["Finding"],
        f"Tensor: {tensor}" + (f"; {numbers}" if numbers else "")
        if tensor
        else numbers and f"Numbers: {numbers}",
        _advice_line(body),  # a line of its own
        f"Step files: {_files(body)}",
        body["ReportLocation"] and f"Report: {body['ReportLocation']}",
        f"Job status: {body['TrainingJobStatus']}. Follow it with: {body['NextCommands'][0]}",
        *(f"Then: {c}" for c in body["NextCommands"][1:]),
    ]
    return subject, "\n".join(line for line in lines if line)


def _mrkdwn(text: str) -> str:
    """Slack mrkdwn escapes (https://api.slack.com/reference/surfaces/formatting#escaping)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_message(body: dict[str, Any]) -> dict[str, Any]:
    """A Slack message (``text`` fallback plus Block Kit ``blocks``) for an incoming webhook."""
    fields = [
        ("Job", f"{body['TrainingJobName']} ({body['TrainingJobStatus']})"),
        ("Rule", body["RuleConfigurationName"]),
        ("Step", _where(body)),
    ]
    if body["Tensor"]:
        fields.append(("Tensor", body["Tensor"]))
    if body["Value"] is not None:
        fields.append(("Value", format_number(body["Value"])))
    if body["Threshold"] is not None:
        fields.append(("Threshold", format_number(body["Threshold"])))
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _clip(_title(body), _SLACK_HEADER)}},
        {
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": _clip(f"*{k}*\n{_mrkdwn(str(v))}", _SLACK_FIELD)}
                for k, v in fields
            ],
        },
        {"type": "section", "text": {"type": "mrkdwn", "text": _clip(_mrkdwn(body["Finding"]), _SLACK_TEXT)}},
    ]
    if body["LikelyCause"] or body["SuggestedFix"]:
        advice = f"*Likely cause:* {_mrkdwn(body['LikelyCause'] or 'unknown')}\n"
        advice += f"*Suggested fix:* {_mrkdwn(body['SuggestedFix'] or 'see the rule documentation')}"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _clip(advice, _SLACK_TEXT)}})
    commands = "\n".join(f"`{_mrkdwn(c)}`" for c in body["NextCommands"])
    blocks.append(
        {"type": "section", "text": {"type": "mrkdwn", "text": _clip(f"*Next:*\n{commands}", _SLACK_TEXT)}}
    )
    context = f"Step files: {_files(body)}"
    if body["ReportLocation"]:
        context += f" | Report: {body['ReportLocation']}"
    blocks.append(
        {"type": "context", "elements": [{"type": "mrkdwn", "text": _clip(_mrkdwn(context), _SLACK_TEXT)}]}
    )
    return {"text": _clip(body["Summary"], _SLACK_TEXT), "blocks": blocks}


def teams_message(body: dict[str, Any]) -> dict[str, Any]:
    """A Teams message holding one Adaptive Card (what a Teams workflow's webhook accepts)."""
    facts = [
        {"title": "Job", "value": f"{body['TrainingJobName']} ({body['TrainingJobStatus']})"},
        {"title": "Rule", "value": body["RuleConfigurationName"]},
        {"title": "Step", "value": _where(body)},
    ]
    if body["Tensor"]:
        facts.append({"title": "Tensor", "value": body["Tensor"]})
    numbers = _numbers(body)
    if numbers:
        facts.append({"title": "Numbers", "value": numbers})
    items: list[dict[str, Any]] = [
        {"type": "TextBlock", "size": "Medium", "weight": "Bolder", "wrap": True, "text": _title(body)},
        {"type": "FactSet", "facts": facts},
        {"type": "TextBlock", "wrap": True, "text": body["Finding"]},
    ]
    advice = _advice_line(body)
    if advice:
        items.append({"type": "TextBlock", "wrap": True, "text": advice})
    items.append(
        {
            "type": "TextBlock",
            "wrap": True,
            "fontType": "Monospace",
            "text": "\n\n".join(body["NextCommands"]),
        }
    )
    items.append({"type": "TextBlock", "wrap": True, "isSubtle": True, "text": f"Step files: {_files(body)}"})
    card = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": items,
    }
    return {
        "type": "message",
        "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "content": card}],
    }


def chatbot_notification(body: dict[str, Any]) -> dict[str, Any]:
    """An AWS Chatbot (Amazon Q Developer in chat applications) custom notification, version 1.0."""
    description = [body["Finding"]]
    numbers = _numbers(body)
    if body["Tensor"]:
        description.append(f"*Tensor:* {body['Tensor']}" + (f" ({numbers})" if numbers else ""))
    advice = _advice_line(body)
    if advice:
        description.append(advice)
    description.append(f"Step files: {_files(body)}")
    return {
        "version": "1.0",
        "source": "custom",
        "id": body["TornasoleEventId"],
        "content": {
            "textType": "client-markdown",
            "title": _clip(_title(body), 250),
            "description": _clip("\n".join(description), 8000),
            "nextSteps": [f"`{c}`" for c in body["NextCommands"]],
            "keywords": [body["TrainingJobName"], body["RuleConfigurationName"]],
        },
        "metadata": {
            "threadId": f"{body['TrainingJobName']}/{body['RuleConfigurationName']}",
            "summary": _clip(body["Summary"], 250),
            "additionalContext": {"TrainingJobArn": body["TrainingJobArn"], "Step": str(body["Step"])},
        },
    }

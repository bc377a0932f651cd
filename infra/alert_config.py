"""Alert destinations of a deployment (``--context alert_webhooks / alert_slack_channels /
alert_teams_channels``), validated once: a bad entry stops synthesis naming the key and the entry.

Each context value is a JSON object from a destination's name (what a job's ``action_json`` names:
``{"name": "webhook", "endpoint": "<name>"}``) to its settings:

* ``alert_webhooks``: ``{"oncall": {"url": "https://...", "secret_arn": "arn:aws:secretsmanager:...",
  "header": "Authorization", "format": "json"}}``. The secret (a JSON secret of yours) holds ``token``,
  the header's value, and, for an endpoint whose URL is itself the secret (a Slack incoming webhook),
  ``url`` (then set ``"url_in_secret": true`` instead of ``url``). ``format`` is what is POSTed: ``json``
  (the alert body), ``slack`` (blocks), ``teams`` (an Adaptive Card message).
* ``alert_slack_channels``: ``{"ml-team": {"workspace_id": "T0123ABCD", "channel_id": "C0123ABCD"}}``
  (AWS Chatbot; the workspace must be authorised in the Chatbot console once).
* ``alert_teams_channels``: ``{"ops": {"tenant_id": "<uuid>", "team_id": "<uuid>",
  "channel_id": "19%3a...%40thread.tacv2"}}`` (AWS Chatbot, Microsoft Teams).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tornasole.alerts.destinations import FORMATS
from tornasole.rules.actions import DESTINATION_NAME

__all__ = [
    "SlackChannel",
    "TeamsChannel",
    "Webhook",
    "parse_slack_channels",
    "parse_teams_channels",
    "parse_webhooks",
]

_SECRET_ARN = re.compile(
    r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]{1,512}$"
)
_HEADER = re.compile(r"^[A-Za-z0-9-]{1,64}$")
_URL = re.compile(r"^https://[A-Za-z0-9.-]+(:\d{1,5})?(/[^\s]*)?$")
_SLACK_ID = re.compile(r"^[A-Z0-9]{1,255}$")  # Chatbot's patterns for workspace and channel ids
_UUID = re.compile(r"^[0-9A-Fa-f]{8}(-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}$")
_TEAMS_CHANNEL = re.compile(r"^[A-Za-z0-9_=+/.,%:@-]{1,256}$")
#: EventBridge API destinations accept at most 300 invocations per second by default.
MAX_RATE_PER_SECOND = 300


@dataclass(frozen=True)
class Webhook:
    """An HTTPS endpoint reached through an EventBridge API destination and connection."""

    name: str
    secret_arn: str
    url: str | None = None  # None: the secret's ``url`` field (a dynamic reference, never in the template)
    header: str = "Authorization"
    format: str = "json"
    rate_per_second: int = 10


@dataclass(frozen=True)
class SlackChannel:
    name: str
    workspace_id: str
    channel_id: str


@dataclass(frozen=True)
class TeamsChannel:
    name: str
    tenant_id: str
    team_id: str
    channel_id: str


class AlertConfigError(ValueError):
    """An invalid destination; the message names the ``--context`` key and the destination."""


def _entries(key: str, value: Any) -> dict[str, dict[str, Any]]:
    if value in (None, ""):
        return {}
    try:
        data = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError as exc:
        raise AlertConfigError(f"invalid --context {key}: not JSON ({exc})") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise AlertConfigError(f"invalid --context {key}: expected a JSON object of name -> settings")
    for name in data:
        if not DESTINATION_NAME.match(str(name)):
            raise AlertConfigError(
                f"invalid --context {key}: destination name {name!r} must be letters, digits, '_', '.', '-' "
                "(at most 64), as jobs name it in action_json"
            )
    return data


def _field(
    key: str, name: str, settings: dict[str, Any], field: str, pattern: re.Pattern[str], expected: str
) -> str:
    value = str(settings.get(field, "")).strip()
    if not pattern.match(value):
        raise AlertConfigError(f"invalid --context {key}: {name}.{field}={value!r}: expected {expected}")
    return value


def _known(key: str, name: str, settings: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(settings) - allowed)
    if unknown:
        raise AlertConfigError(
            f"invalid --context {key}: {name}: unknown setting(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )


def parse_webhooks(key: str, value: Any) -> tuple[Webhook, ...]:
    out = []
    for name, s in _entries(key, value).items():
        _known(key, name, s, {"url", "url_in_secret", "secret_arn", "header", "format", "rate_per_second"})
        secret = _field(key, name, s, "secret_arn", _SECRET_ARN, "a Secrets Manager secret ARN")
        in_secret = s.get("url_in_secret") in (True, "true", "True")
        if in_secret == ("url" in s):
            raise AlertConfigError(
                f"invalid --context {key}: {name}: give either url (https://...) or url_in_secret: true"
            )
        url = None if in_secret else _field(key, name, s, "url", _URL, "an https:// URL")
        header = _field(key, name, {"header": "Authorization", **s}, "header", _HEADER, "an HTTP header name")
        fmt = str(s.get("format", "json"))
        if fmt not in FORMATS or fmt == "chatbot":
            raise AlertConfigError(
                f"invalid --context {key}: {name}.format={fmt!r}: expected json, slack or teams"
            )
        rate = s.get("rate_per_second", 10)
        if isinstance(rate, bool) or not isinstance(rate, int) or not 1 <= rate <= MAX_RATE_PER_SECOND:
            raise AlertConfigError(
                f"invalid --context {key}: {name}.rate_per_second={rate!r}: "
                f"expected 1 to {MAX_RATE_PER_SECOND}"
            )
        out.append(Webhook(name, secret, url, header, fmt, rate))
    return tuple(out)


def parse_slack_channels(key: str, value: Any) -> tuple[SlackChannel, ...]:
    out = []
    for name, s in _entries(key, value).items():
        _known(key, name, s, {"workspace_id", "channel_id"})
        workspace = _field(key, name, s, "workspace_id", _SLACK_ID, "a Slack workspace id like T0123ABCD")
        channel = _field(key, name, s, "channel_id", _SLACK_ID, "a Slack channel id like C0123ABCD")
        out.append(SlackChannel(name, workspace, channel))
    return tuple(out)


def parse_teams_channels(key: str, value: Any) -> tuple[TeamsChannel, ...]:
    out = []
    for name, s in _entries(key, value).items():
        _known(key, name, s, {"tenant_id", "team_id", "channel_id"})
        tenant = _field(key, name, s, "tenant_id", _UUID, "the Microsoft tenant id (a UUID)")
        team = _field(key, name, s, "team_id", _UUID, "the team id (a UUID)")
        channel = _field(key, name, s, "channel_id", _TEAMS_CHANNEL, "the Teams channel id (URL-encoded)")
        out.append(TeamsChannel(name, tenant, team, channel))
    return tuple(out)


PARSERS: dict[str, Callable[[str, Any], tuple[Any, ...]]] = {
    "alert_webhooks": parse_webhooks,
    "alert_slack_channels": parse_slack_channels,
    "alert_teams_channels": parse_teams_channels,
}

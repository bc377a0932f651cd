"""Which alert destinations exist, and the check that a job names only those.

A ``webhook:``/``slack:``/``teams:`` action names a destination; its URL and secret live with the
operator (the stack's context, ``tornasole local up --webhook``), who also sets
``TORNASOLE_ALERT_DESTINATIONS`` (``"webhook:oncall,slack:ml-team"``) where jobs are registered: the
stack's functions get it, the stack's ``RegisterJobCommand`` output and ``tornasole local up`` print it.
Registration refuses a name not in that list, naming the rule and the action; with the variable unset,
every destination action is refused (nothing could deliver it, and an alert nobody receives is worse
than a registration that says so).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from tornasole import config
from tornasole.rules.actions import DESTINATION_ACTIONS, DESTINATION_NAME, Action
from tornasole.stack_spec import EVENT_ID_FIELD

__all__ = [
    "DETAIL_TYPE_ALERT",
    "FORMATS",
    "alert_event_detail",
    "configured_destinations",
    "destination_problems",
    "format_destinations",
    "parse_destination",
]

#: detail-type of the event that carries one alert to its destination (the stack routes on
#: ``detail.Destination``).
DETAIL_TYPE_ALERT = "Tornasole Alert"
#: What a webhook POSTs, by its configured format: the field of the alert event's detail that is the body.
FORMATS = {"json": "Alert", "slack": "Slack", "teams": "Teams", "chatbot": "Chatbot"}


def alert_event_detail(destination: str, body: dict[str, Any]) -> dict[str, Any]:
    """Detail of the ``Tornasole Alert`` event: the destination it is for, the body, its renderings.

    Every rendering travels in the event, so where it goes is the operator's choice alone: a generic
    webhook takes ``Alert`` (the documented body), a Slack incoming webhook ``Slack``, a Teams workflow
    ``Teams``, an AWS Chatbot channel's topic ``Chatbot`` (the routes select one with an input path).
    """
    from tornasole.alerts.render import chatbot_notification, slack_message, teams_message

    return {
        "Destination": destination,
        "Alert": body,
        "Slack": slack_message(body),
        "Teams": teams_message(body),
        "Chatbot": chatbot_notification(body),
        EVENT_ID_FIELD: body.get("TornasoleEventId", ""),
    }


def parse_destination(text: str) -> tuple[str, str]:
    """``"webhook:oncall"`` -> ``("webhook", "oncall")``; ValueError saying what is accepted.

    Examples
    --------
    >>> parse_destination("Slack:ml-team")
    ('slack', 'ml-team')
    """
    kind, _, name = text.strip().partition(":")
    kind = kind.strip().lower()
    name = name.strip()
    if kind not in DESTINATION_ACTIONS or not DESTINATION_NAME.match(name):
        raise ValueError(
            f"alert destination {text!r}: expected KIND:NAME with KIND one of "
            f"{', '.join(DESTINATION_ACTIONS)} and NAME of letters, digits, '_', '.', '-' (at most 64)"
        )
    return kind, name


def format_destinations(destinations: Iterable[str]) -> str:
    """The ``TORNASOLE_ALERT_DESTINATIONS`` value for these ``kind:name`` destinations."""
    return ",".join(sorted(set(destinations)))


def configured_destinations(env: Mapping[str, str] | None = None) -> frozenset[str]:
    """The ``kind:name`` destinations of ``TORNASOLE_ALERT_DESTINATIONS`` (malformed entries refused)."""
    text = (os.environ if env is None else env).get(config.ALERT_DESTINATIONS, "")
    out = set()
    for item in text.split(","):
        if item.strip():
            try:
                kind, name = parse_destination(item)
            except ValueError as exc:
                raise ValueError(f"{config.ALERT_DESTINATIONS}: {exc}") from None
            out.add(f"{kind}:{name}")
    return frozenset(out)


def destination_problems(rule_name: str, actions: Iterable[Action], configured: frozenset[str]) -> list[str]:
    """One problem per destination action of ``rule_name`` that names no configured destination."""
    problems = []
    for i, action in enumerate(actions):
        dest = action.destination
        if dest is None or dest in configured:
            continue
        known = ", ".join(sorted(d for d in configured if d.startswith(action.name + ":"))) or "none"
        where = (
            f"configured here: {known}"
            if configured
            else f"none is configured here ({config.ALERT_DESTINATIONS} is unset)"
        )
        problems.append(
            f"rule {rule_name!r}: action_json action #{i} ({dest}) names no configured {action.name} "
            f"destination; {where}. The operator configures them (docs/ALERTS.md)"
        )
    return problems

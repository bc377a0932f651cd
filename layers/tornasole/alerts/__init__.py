"""Alerts a person can act on: the documented alert body, its renderings, and the destinations allowed.

- :mod:`~tornasole.alerts.body`: the one alert body (docs/EVENTS.md "Alert body") and its JSON schema;
- :mod:`~tornasole.alerts.render`: the same facts as plain text (e-mail), Slack blocks, a Teams card and
  an AWS Chatbot custom notification;
- :mod:`~tornasole.alerts.destinations`: which ``webhook:``/``slack:``/``teams:`` names the operator
  configured, and the event that carries an alert to them.

Pure: nothing here performs I/O (the local mode's sender is ``tornasole.local.alert_sender``).

Floor plan: imported by the evaluator and local; imports rules (actions, outcome), stack_spec and
config only.
"""

from __future__ import annotations

from tornasole.alerts.body import ALERT_SCHEMA, SCHEMA_VERSION, alert_body
from tornasole.alerts.destinations import (
    DETAIL_TYPE_ALERT,
    configured_destinations,
    destination_problems,
)

__all__ = [
    "ALERT_SCHEMA",
    "DETAIL_TYPE_ALERT",
    "SCHEMA_VERSION",
    "alert_body",
    "configured_destinations",
    "destination_problems",
]

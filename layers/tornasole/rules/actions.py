"""Parse and validate a rule's ``action_json`` (RULES.md "Actions").

SageMaker attaches actions to a rule as a JSON list in
``RuleParameters["action_json"]``; ``smdebug_rulesconfig`` writes the names in
lower case (``stoptraining``, ``email``, ``sms``). smdebug lower-cases the whole
string before parsing; we match names case-insensitively but keep endpoints as
written (an e-mail address or prefix is not ours to change). A single object
is accepted as a one-element list, as smdebug does.

Unlike smdebug (which logs and drops a bad action), a malformed ``action_json``
is a :class:`~tornasole.exceptions.RuleParameterError`: a user who asked to stop
training on a fire should learn at registration that the request cannot work.
Running the actions is the evaluator's job; rules only carry them.

Reminders (Tornasole's addition): an ``email``/``sms`` action notifies when its
rule first finds an issue, then sends at most one reminder per
``reminder_minutes`` (default :data:`DEFAULT_REMINDER_MINUTES`, 60) while the rule
keeps firing, instead of one message per firing step; the per-step
``Tornasole Rule Issue Found`` events are unaffected. Set it per action:
``{"name": "email", "endpoint": "a@b.c", "reminder_minutes": 15}``.
``stoptraining`` is unaffected (it stops the job once).

Alert destinations (Tornasole's addition, docs/ALERTS.md): ``webhook``, ``slack``
and ``teams`` name a destination the operator configured where the evaluator
runs (the stack's ``alert_webhooks`` / ``alert_slack_channels`` /
``alert_teams_channels`` context, ``tornasole local up --webhook``), never a URL:
``{"name": "webhook", "endpoint": "oncall"}``. A job's configuration is written
by whoever trains; if it could carry a URL, job data could be posted anywhere,
and an endpoint's secret would sit in every event that carries the job's
rules. Whether the name is configured is checked at registration
(``tornasole.alerts.destinations``); the same reminder rule as ``email`` applies.

Capture on demand (Tornasole's addition, docs/RULES.md "Actions"): ``capture`` asks the
training job, at the rule's first firing, to save the full tensors of ``collections``
(default ``gradients,weights``) for its next ``steps`` steps (default 10, at most 100):
``{"name": "capture", "steps": "20", "collections": "gradients,weights"}``. The bounds and
the collection names are :mod:`tornasole.format.capture_request`'s, checked here at
registration and again by the hook that reads the request.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from tornasole.exceptions import RuleParameterError
from tornasole.format.capture_request import CaptureRequestError, parse_collections, parse_steps

__all__ = [
    "Action",
    "ALLOWED_ACTIONS",
    "DEFAULT_REMINDER_MINUTES",
    "DESTINATION_ACTIONS",
    "DESTINATION_NAME",
    "parse_actions",
]

#: Actions whose endpoint names an operator-configured destination (never an address or URL).
DESTINATION_ACTIONS = ("webhook", "slack", "teams")
ALLOWED_ACTIONS = ("stoptraining", "email", "sms", *DESTINATION_ACTIONS, "capture")
#: What a destination's name may be: short, no scheme, no slash, so a URL can never pass for one.
DESTINATION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: Minimum minutes between two messages of one notifying action of one rule (the first is sent at once).
DEFAULT_REMINDER_MINUTES = 60.0
#: Longest accepted reminder interval (a week): longer means "never remind", which 0 does not mean.
MAX_REMINDER_MINUTES = 7 * 24 * 60.0


@dataclass(frozen=True)
class Action:
    """One parsed action.

    Attributes
    ----------
    name : str
        ``"stoptraining"``, ``"email"``, ``"sms"``, ``"webhook"``, ``"slack"``, ``"teams"`` or ``"capture"``.
    endpoint : str or None
        E-mail address or phone number (``email``/``sms``); the configured destination's name
        (``webhook``/``slack``/``teams``).
    training_job_prefix : str or None
        For ``stoptraining``: which job to stop (None: the job the rule watches).
    reminder_minutes : float or None
        For notifying actions: minimum minutes between messages while the rule keeps firing
        (None: :data:`DEFAULT_REMINDER_MINUTES`).
    steps : int or None
        For ``capture``: how many steps of full tensors to ask for.
    collections : tuple of str or None
        For ``capture``: which collections (sorted, known names).

    Examples
    --------
    >>> parse_actions("R", '[{"name": "Email", "endpoint": "a@b.c"}]')[0].endpoint
    'a@b.c'
    """

    name: str
    endpoint: str | None = None
    training_job_prefix: str | None = None
    reminder_minutes: float | None = None
    steps: int | None = None
    collections: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        # A stored rule configuration rebuilds its actions from :meth:`to_dict` (``Action(**d)``), where a
        # capture's fields are SageMaker-style strings: they are parsed (and bounded) again here.
        if self.steps is not None and not isinstance(self.steps, int):
            object.__setattr__(self, "steps", parse_steps(self.steps))
        if self.collections is not None and not isinstance(self.collections, tuple):
            object.__setattr__(self, "collections", parse_collections(self.collections))

    @property
    def destination(self) -> str | None:
        """``"webhook:oncall"`` for a destination action (how the stack routes it), else None."""
        return f"{self.name}:{self.endpoint}" if self.name in DESTINATION_ACTIONS else None

    @property
    def reminder_ms(self) -> int:
        """The reminder interval in milliseconds (the default when none was given)."""
        minutes = DEFAULT_REMINDER_MINUTES if self.reminder_minutes is None else self.reminder_minutes
        return int(minutes * 60_000)

    def to_dict(self) -> dict[str, str | float]:
        d: dict[str, str | float] = {"name": self.name}
        if self.endpoint is not None:
            d["endpoint"] = self.endpoint
        if self.training_job_prefix is not None:
            d["training_job_prefix"] = self.training_job_prefix
        if self.reminder_minutes is not None:
            d["reminder_minutes"] = self.reminder_minutes
        if self.steps is not None:
            d["steps"] = str(self.steps)
        if self.collections is not None:
            d["collections"] = ",".join(self.collections)
        return d


def _reminder_minutes(rule_name: str, i: int, value: object) -> float | None:
    if value is None or value == "":
        return None
    try:
        minutes = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        minutes = -1.0
    if isinstance(value, bool) or not 0 <= minutes <= MAX_REMINDER_MINUTES:
        raise RuleParameterError(
            rule_name,
            "action_json",
            f"action #{i}: reminder_minutes {value!r} must be a number of minutes from 0 to "
            f"{MAX_REMINDER_MINUTES:g}",
        )
    return minutes


def parse_actions(rule_name: str, action_json: str | list | dict | None) -> tuple[Action, ...]:
    """Parse ``action_json`` into :class:`Action` objects; ``None``/empty gives ``()``.

    Raises
    ------
    RuleParameterError
        Not JSON, not a list of objects, an unknown action name, or a missing endpoint.

    Examples
    --------
    >>> parse_actions("R", '{"name": "stoptraining", "training_job_prefix": "job-1"}')[0].name
    'stoptraining'
    """
    if action_json is None:
        return ()
    if isinstance(action_json, str):
        text = action_json.strip()
        if not text:
            return ()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RuleParameterError(rule_name, "action_json", f"is not valid JSON: {exc}") from exc
    else:
        data = action_json
    items = [data] if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise RuleParameterError(rule_name, "action_json", "must be a JSON list of action objects")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "name" not in item:
            raise RuleParameterError(rule_name, "action_json", f"action #{i} must be an object with a 'name'")
        name = str(item["name"]).strip().lower()
        if name not in ALLOWED_ACTIONS:
            raise RuleParameterError(
                rule_name,
                "action_json",
                f"action #{i}: unknown action {item['name']!r}; allowed: {', '.join(ALLOWED_ACTIONS)}",
            )
        if name == "capture":
            try:
                steps = parse_steps(item.get("steps"), f"action #{i} (capture)")
                colls = parse_collections(item.get("collections"), f"action #{i} (capture)")
            except CaptureRequestError as exc:
                raise RuleParameterError(rule_name, "action_json", str(exc)) from exc
            out.append(Action(name, steps=steps, collections=colls))
            continue
        if name == "stoptraining":
            prefix = item.get("training_job_prefix")
            out.append(Action(name, training_job_prefix=None if prefix in (None, "") else str(prefix)))
            continue
        endpoint = item.get("endpoint")
        if not endpoint:
            raise RuleParameterError(rule_name, "action_json", f"action #{i} ({name}) needs an 'endpoint'")
        if name in DESTINATION_ACTIONS and not DESTINATION_NAME.match(str(endpoint)):
            raise RuleParameterError(
                rule_name,
                "action_json",
                f"action #{i} ({name}): endpoint {str(endpoint)[:80]!r} must name a destination the "
                "operator configured (letters, digits, '_', '.', '-'; at most 64), never a URL: "
                "see docs/ALERTS.md",
            )
        out.append(
            Action(
                name,
                endpoint=str(endpoint),
                reminder_minutes=_reminder_minutes(rule_name, i, item.get("reminder_minutes")),
            )
        )
    return tuple(out)

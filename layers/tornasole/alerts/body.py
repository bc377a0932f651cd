"""The alert body: one JSON object per alert, with everything a person needs to act (EVENTS.md).

Every alert (a webhook's POST, the ``Alert`` of a ``Tornasole Alert`` event, and through the
renderings of :mod:`tornasole.alerts.render` the e-mail, Slack and Teams messages) is built from this
body, so the channels cannot disagree about the facts: the job, the rule and the step; the tensor and
the numbers the rule compared with its threshold; the rule's likely cause and suggested fix; the
commands to run next; and where the step's files (and a report, when the rule wrote one) are.

:data:`ALERT_SCHEMA` is its JSON Schema (docs/EVENTS.md prints the same object; a test keeps them
equal and validates every alert the tests produce against it).
"""

from __future__ import annotations

import json
import math
import shlex
from typing import Any

from tornasole.rules.outcome import format_number, split_advice

__all__ = [
    "ALERT_SCHEMA",
    "MAX_STEP_FILES",
    "MAX_VALUES_BYTES",
    "SCHEMA_VERSION",
    "alert_body",
    "split_cause_and_fix",
]

SCHEMA_VERSION = "1"
#: The rule's recorded numbers kept in ``Values`` (beyond it: a marked preview), so an alert stays small.
MAX_VALUES_BYTES = 2048
#: What a rule's values may put in the body's own fields (a custom rule's values are not ours).
_MAX_SCALAR_CHARS, _MAX_NAME_CHARS = 64, 512
#: A step of a job with many workers has a file per worker: the alert names the first ones (the trial
#: path and ``tornasole jobs logs`` lead to the rest), so it stays far below EventBridge's 256 KB.
MAX_STEP_FILES = 8
_FIX = ". Suggested fix: "
_CAUSE = "Likely cause: "

_NULLABLE_STR = {"type": ["string", "null"]}
_SCALAR = {"type": ["number", "string", "null"]}
ALERT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Tornasole alert body",
    "type": "object",
    "additionalProperties": False,
    "required": [
        "SchemaVersion",
        "Summary",
        "Reminder",
        "TrainingJobName",
        "TrainingJobArn",
        "TrainingJobStatus",
        "RuleConfigurationName",
        "RuleEvaluationStatus",
        "Step",
        "Mode",
        "ModeStep",
        "Tensor",
        "Value",
        "Threshold",
        "Values",
        "Finding",
        "LikelyCause",
        "SuggestedFix",
        "NextCommands",
        "StepFiles",
        "ReportLocation",
        "TornasoleEventId",
    ],
    "properties": {
        "SchemaVersion": {"const": SCHEMA_VERSION},
        "Summary": {"type": "string", "minLength": 1, "maxLength": 300},
        "Reminder": {"type": "boolean"},
        "TrainingJobName": {"type": "string", "minLength": 1},
        "TrainingJobArn": {"type": "string", "minLength": 1},
        "TrainingJobStatus": {"enum": ["InProgress", "Completed", "Failed", "Stopping", "Stopped"]},
        "RuleConfigurationName": {"type": "string", "minLength": 1},
        "RuleEvaluationStatus": {"const": "IssuesFound"},
        "Step": {"type": ["integer", "null"], "minimum": 0},
        "Mode": _NULLABLE_STR,
        "ModeStep": {"type": ["integer", "null"], "minimum": 0},
        "Tensor": {"type": ["string", "null"], "maxLength": 512},
        "Value": _SCALAR,
        "Threshold": _SCALAR,
        "Values": {"type": "object"},
        "Finding": {"type": "string", "minLength": 1, "maxLength": 1024},
        "LikelyCause": _NULLABLE_STR,
        "SuggestedFix": _NULLABLE_STR,
        "NextCommands": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
        "StepFiles": {
            "type": "object",
            "additionalProperties": False,
            "required": ["TrialPath", "IndexFiles", "EventFiles"],
            "properties": {
                "TrialPath": {"type": "string"},
                "IndexFiles": {"type": "array", "maxItems": 8, "items": {"type": "string"}},
                "EventFiles": {"type": "array", "maxItems": 8, "items": {"type": "string"}},
            },
        },
        "ReportLocation": {"type": ["string", "null"], "maxLength": 512},
        "TornasoleEventId": {"type": "string", "minLength": 1},
    },
}


def split_cause_and_fix(advice: str) -> tuple[str | None, str | None]:
    """``"Likely cause: a. Suggested fix: b."`` -> ``("a", "b")``; None for a part that is missing.

    Examples
    --------
    >>> split_cause_and_fix("Likely cause: lr too high. Suggested fix: lower it 10x.")
    ('lr too high', 'lower it 10x')
    >>> split_cause_and_fix("")
    (None, None)
    """
    text = (advice or "").strip()
    if not text.startswith(_CAUSE):
        return None, None
    cause, _, fix = text[len(_CAUSE) :].partition(_FIX)
    cause, fix = cause.strip().rstrip("."), fix.strip().rstrip(".")
    return cause or None, fix or None


def _scalar(value: Any) -> float | int | str | None:
    """A number a person compares (NaN/Inf as their text, as ``plain_value`` writes them), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        return value[:_MAX_SCALAR_CHARS]
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return None


def _values(values: dict[str, Any]) -> dict[str, Any]:
    try:
        text = json.dumps(values, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError) as exc:
        return {"values_unavailable": f"{type(exc).__name__}"}
    if len(text.encode()) <= MAX_VALUES_BYTES:
        return json.loads(text)
    return {"values_truncated": True, "preview": text[: MAX_VALUES_BYTES // 2]}


def next_commands(job: str, rule: str, trial_path: str, tensor: str | None) -> list[str]:
    """What to run next: the job's statuses, the rule's firing steps, and a plot of the tensor."""
    q = shlex.quote
    commands = [
        f"tornasole jobs status {q(job)}",
        f"tornasole jobs logs {q(job)} --rule {q(rule)} --issues-only",
    ]
    if tensor:
        commands.append(
            f"tornasole plot {q(trial_path)} --tensor {q(tensor)} --job {q(job)} -o {q(job + '.png')}"
        )
    return commands


def alert_body(
    *,
    job: str,
    job_arn: str,
    job_status: str,
    rule: str,
    step: int | None,
    mode: str | None,
    mode_step: int | None,
    details: str,
    values: dict[str, Any],
    files: dict[str, Any],
    event_id: str,
    reminder: bool = False,
) -> dict[str, Any]:
    """The alert body of one firing (``details``: the rule's StatusDetails, advice at its end); ``step``
    None for a finding about the job as a whole (StalledTrainingRule: no new step came).

    Examples
    --------
    >>> b = alert_body(job="j", job_arn="arn:j", job_status="InProgress", rule="R", step=3, mode=None,
    ...     mode_step=None, details="R: x < 1. Likely cause: a. Suggested fix: b.",
    ...     values={"tensor": "g", "value": 0.5, "threshold": 1}, files={"TrialPath": "s3://b/j",
    ...     "IndexFiles": [], "EventFiles": []}, event_id="e")
    >>> b["Tensor"], b["Value"], b["Threshold"], b["LikelyCause"], b["SuggestedFix"]
    ('g', 0.5, 1, 'a', 'b')
    """
    finding, advice = split_advice(details)
    cause, fix = split_cause_and_fix(advice)
    tensor = values["tensor"][:_MAX_NAME_CHARS] if isinstance(values.get("tensor"), str) else None
    value, threshold = _scalar(values.get("value")), _scalar(values.get("threshold"))
    summary = f"{rule} found issues in training job {job}" + ("" if step is None else f" at step {step}")
    if tensor:
        summary += f" ({tensor}"
        if value is not None and threshold is not None:
            summary += f": {format_number(value)} vs threshold {format_number(threshold)}"
        summary += ")"
    report = values.get("report")
    trial_path = str(files.get("TrialPath", ""))
    return {
        "SchemaVersion": SCHEMA_VERSION,
        "Summary": summary[:300],
        "Reminder": reminder,
        "TrainingJobName": job,
        "TrainingJobArn": job_arn,
        "TrainingJobStatus": job_status,
        "RuleConfigurationName": rule,
        "RuleEvaluationStatus": "IssuesFound",
        "Step": None if step is None else int(step),
        "Mode": mode,
        "ModeStep": mode_step,
        "Tensor": tensor,
        "Value": value,
        "Threshold": threshold,
        "Values": _values(values),
        "Finding": (finding or summary)[:1024],
        "LikelyCause": cause,
        "SuggestedFix": fix,
        "NextCommands": next_commands(job, rule, trial_path, tensor),
        "StepFiles": {
            "TrialPath": trial_path,
            "IndexFiles": list(files.get("IndexFiles", []))[:MAX_STEP_FILES],
            "EventFiles": list(files.get("EventFiles", []))[:MAX_STEP_FILES],
        },
        "ReportLocation": report[:_MAX_NAME_CHARS] if isinstance(report, str) and report else None,
        "TornasoleEventId": event_id,
    }

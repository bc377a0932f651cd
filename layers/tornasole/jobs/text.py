"""A job and its events as text: one line per EventBridge event, a job's rule statuses.

Why here: the CLI (`tornasole local up`, `tornasole demo`) and a user's own code
print the same things from the same public data (:func:`tornasole.jobs.describe`
and the bus's events), so there is one formatter, in the public jobs API.
"""

from __future__ import annotations

from typing import Any

__all__ = ["format_event", "format_job"]


def format_event(event: dict[str, Any]) -> str:
    """One line per EventBridge event: a rule's fire, or the job's status and each rule's status."""
    d = event.get("detail", {})
    kind = event.get("detail-type", "?")
    if "Destination" in d and isinstance(d.get("Alert"), dict):  # a webhook/slack/teams alert
        return f"[{kind}] {d['Destination']}: {d['Alert'].get('Summary', '')}"
    if "RuleConfigurationName" in d:
        return (
            f"[{kind}] {d.get('TrainingJobName')} / {d.get('RuleConfigurationName')} "
            f"at step {d.get('Step')}: {d.get('StatusDetails', '')}"
        )
    rules = ", ".join(
        f"{s.get('RuleConfigurationName')}={s.get('RuleEvaluationStatus')}"
        for s in d.get("DebugRuleEvaluationStatuses", [])
    )
    return f"[{kind}] {d.get('TrainingJobName')}: {d.get('TrainingJobStatus')} ({rules})"


def format_job(description: dict[str, Any]) -> str:
    """A job's status and one line per rule, from its DescribeTrainingJob-shaped dict.

    Examples
    --------
    >>> print(format_job({"TrainingJobName": "j", "TrainingJobStatus": "Completed",
    ...     "DebugRuleEvaluationStatuses": [{"RuleConfigurationName": "DeadRelu",
    ...     "RuleEvaluationStatus": "NoIssuesFound"}]}))
    job j: Completed
      DeadRelu            NoIssuesFound
    """
    lines = [f"job {description.get('TrainingJobName')}: {description.get('TrainingJobStatus')}"]
    statuses = [*description.get("DebugRuleEvaluationStatuses", [])]
    statuses += description.get("ProfilerRuleEvaluationStatuses", [])
    for s in statuses:
        details = s.get("StatusDetails") or ""
        line = f"  {s.get('RuleConfigurationName', ''):<18}  {s.get('RuleEvaluationStatus', ''):<13}"
        lines.append(f"{line}  {details}".rstrip())
    return "\n".join(lines)

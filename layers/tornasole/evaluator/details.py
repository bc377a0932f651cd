"""The shapes users read: DescribeTrainingJob-like details, issue events, alert messages.

Pure functions of the stored state (no I/O), so the event a transition emits,
``describe()`` and ``rule_job_summary()`` cannot disagree: they are the same
function of the same ``JobState``. Field names and value sets are EVENTS.md's
(SageMaker's own); times are epoch milliseconds as strings.
"""

from __future__ import annotations

from typing import Any

from tornasole.evaluator.models import SECONDARY_STATUS, TERMINAL_JOB, JobState, RuleState, rule_job_arn
from tornasole.stack_spec import EVENT_ID_FIELD

__all__ = [
    "MAX_STATUS_DETAILS",
    "REPORT_LOCATION_FIELD",
    "clip",
    "describe",
    "rule_statuses",
    "issue_detail",
    "firing_alert",
    "step_files",
]

MAX_STATUS_DETAILS = 1024
#: The detail field of an ended job that says where its HTML report is (``s3://...``), or null.
REPORT_LOCATION_FIELD = "TornasoleReportLocation"


def clip(text: str, limit: int = MAX_STATUS_DETAILS) -> str:
    """StatusDetails is at most 1024 characters (SageMaker's limit): keep the start, mark the cut."""
    text = text or ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _ms(value: int | None) -> str | None:
    return None if value is None else str(int(value))


def rule_statuses(state: JobState) -> list[dict[str, Any]]:
    """``DebugRuleEvaluationStatuses``: one entry per (tensor) rule, in registration order."""
    return [_rule_status(state, r) for r in state.rules if not r.config.profiler]


def profiler_rule_statuses(state: JobState) -> list[dict[str, Any]]:
    """``ProfilerRuleEvaluationStatuses``: one entry per profiler rule, in registration order."""
    return [_rule_status(state, r) for r in state.rules if r.config.profiler]


def _rule_status(state: JobState, rule: RuleState) -> dict[str, Any]:
    return {
        "RuleConfigurationName": rule.config.name,
        "RuleEvaluationJobArn": rule_job_arn(state.arn, rule.config.name),
        "RuleEvaluationStatus": rule.status.value,
        "StatusDetails": clip(rule.details),
        "LastModifiedTime": _ms(rule.last_modified_ms),
    }


def describe(state: JobState, event_id: str | None = None) -> dict[str, Any]:
    """The DescribeTrainingJob-shaped dict of EVENTS.md (also the state-change event's detail)."""
    hook = dict(state.hook_config or {})
    hook.setdefault("S3OutputPath", state.trial_path)
    hook.setdefault("CollectionConfigurations", [])
    detail: dict[str, Any] = {
        "TrainingJobName": state.name,
        "TrainingJobArn": state.arn,
        "TrainingJobStatus": state.status.value,
        "SecondaryStatus": SECONDARY_STATUS[state.status],
        "DebugHookConfig": hook,
        "DebugRuleConfigurations": [r.config.to_sagemaker() for r in state.rules if not r.config.profiler],
        "DebugRuleEvaluationStatuses": rule_statuses(state),
        "CreationTime": _ms(state.creation_ms),
        "TrainingStartTime": _ms(state.start_ms),
        "LastModifiedTime": _ms(state.last_modified_ms),
    }
    if any(r.config.profiler for r in state.rules):  # SageMaker's fields for ProfilerRule.sagemaker(...)
        detail["ProfilerRuleConfigurations"] = [
            r.config.to_sagemaker() for r in state.rules if r.config.profiler
        ]
        detail["ProfilerRuleEvaluationStatuses"] = profiler_rule_statuses(state)
    for key, value in (state.describe_fields or {}).items():
        detail.setdefault(key, value)
    if state.end_ms is not None:
        detail["TrainingEndTime"] = _ms(state.end_ms)
    if state.failure_reason:
        detail["FailureReason"] = clip(state.failure_reason)
    if state.job_error:
        detail["TornasoleJobError"] = clip(state.job_error)
    if state.status in TERMINAL_JOB:  # null when no report was written (docs/REPORTS.md)
        detail[REPORT_LOCATION_FIELD] = state.report_location
    if state.rewritten_at_ms is not None:
        detail["TornasoleTrialRewritten"] = {
            "Time": _ms(state.rewritten_at_ms),
            "Key": state.rewrite_key,
            "Rewrites": state.rewrites,
            "StatusDetails": rewrite_details(
                state.status.value,
                state.rewrite_key or "",
                state.end_ms is None or (state.last_rewrite_ms or state.rewritten_at_ms) < state.end_ms,
            ),
        }
    if event_id is not None:
        detail[EVENT_ID_FIELD] = event_id
    return detail


def rewrite_details(status: str, key: str, while_running: bool = False) -> str:
    """What ``TornasoleTrialRewritten`` says (``lifecycle``: the trial written again after the end, or
    evaluated steps written again while the job ran: a resumed run)."""
    if while_running:
        return (
            f"evaluated steps were written again while the job ran ({key}): a run resumed into the same "
            "output path; each step written again was evaluated again, its findings are new issues, and "
            "the verdicts published before stay"
        )[:MAX_STATUS_DETAILS]
    return (
        f"the trial was written again after the job was {status} ({key}): its verdict describes the "
        "data read before; register a new job on a new output path to evaluate the new run"
    )[:MAX_STATUS_DETAILS]


def step_files(trial_path: str, step: int, workers: list[str]) -> dict[str, Any]:
    """Where a step's files are, so an alarm can say exactly where to look (FORMAT.md 1)."""
    from tornasole.format import paths

    root = trial_path.rstrip("/")
    return {
        "TrialPath": root,
        "IndexFiles": [f"{root}/{paths.index_file_name(step, w)}" for w in sorted(workers)],
        "EventFiles": [f"{root}/{paths.event_file_name(step, w)}" for w in sorted(workers)],
    }


def issue_detail(
    state: JobState,
    rule_name: str,
    step: int,
    mode: str | None,
    mode_step: int | None,
    details: str,
    workers: list[str],
    event_id: str,
) -> dict[str, Any]:
    """Detail of the ``Tornasole Rule Issue Found`` event (one per rule and firing step)."""
    return {
        "TrainingJobName": state.name,
        "TrainingJobArn": state.arn,
        "RuleConfigurationName": rule_name,
        "RuleEvaluationJobArn": rule_job_arn(state.arn, rule_name),
        "Step": step,
        "Mode": mode,
        "ModeStep": mode_step,
        "StatusDetails": clip(details),
        "S3Location": step_files(state.trial_path, step, workers),
        EVENT_ID_FIELD: event_id,
    }


def firing_alert(
    state: JobState,
    rule_name: str,
    step: int | None,
    mode: str | None,
    mode_step: int | None,
    details: str,
    values: dict[str, Any],
    files: dict[str, Any],
    event_id: str,
) -> dict[str, Any]:
    """The alert body (docs/EVENTS.md "Alert body") of one firing of ``rule_name`` at ``step`` (None: a
    finding about the job as a whole, such as a stall)."""
    from tornasole.alerts.body import alert_body

    if state.report_location and not values.get("report"):  # the job's report, once it has one
        values = {**values, "report": state.report_location}
    return alert_body(
        job=state.name,
        job_arn=state.arn,
        job_status=state.status.value,
        rule=rule_name,
        step=step,
        mode=mode,
        mode_step=mode_step,
        details=clip(details),
        values=values,
        files=files,
        event_id=event_id,
    )

"""Pure decisions: which status change comes next, given the stored state and new facts.

Each function takes a ``JobState`` and returns the next ``Change`` or None, so
``Transitions.apply`` can re-run it after a lost race and a replayed
notification finds nothing left to do. Statuses only move forward:
InProgress -> IssuesFound (sticky) | Error | NoIssuesFound, and job
InProgress -> Stopping -> Stopped, InProgress -> Completed.

"Nothing evaluated" is never "no issues", and it is not an error either. A rule
that, by the time its job completes, evaluated its tensors at no step at all
(every step skipped because none of its tensors matched, unreadable, incomplete,
or outside its start/end steps) has found nothing: its verdict is
``NothingEvaluated`` (``tornasole.rules.verdict``, the logic ``tornasole invoke``
shares). RuleEvaluationStatus stays one of SageMaker's six values, so it is stored
as ``NoIssuesFound`` with StatusDetails starting ``NothingEvaluated:`` (the
``NOTHING_EVALUATED`` prefix) that say what the rule reads and how to save it;
``jobs status`` shows ``NothingEvaluated`` and ``--fail-on-issues`` does not fail
on it (docs/EVENTS.md says why not ``Error``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tornasole.alerts.render import text_message
from tornasole.evaluator.details import MAX_STATUS_DETAILS, clip, firing_alert, step_files
from tornasole.evaluator.lifecycle import ended_as
from tornasole.evaluator.models import EVALUATING, JobState, JobStatus, RuleStatus, StepOutcome
from tornasole.evaluator.store.outbox import OutboxItem
from tornasole.evaluator.store.transitions import JOB, Change
from tornasole.format.capture_request import CaptureRequest, capture_request_file_name
from tornasole.rules import verdict as rule_verdict
from tornasole.stack_spec import DETAIL_TYPE_RULE_ISSUE_FOUND, STOP_SIGNAL_FILE

__all__ = [
    "NOTHING_EVALUATED",
    "STALLED_RULE",
    "after_outcomes",
    "alert_items",
    "capture_item",
    "capture_request",
    "completion",
    "ready_to_complete",
    "issue_extras",
    "is_rewrite",
    "stalled",
    "stop_item",
    "wants_stop",
]

STALLED_RULE = "StalledTrainingRule"
#: StatusDetails prefix of a rule that completed without evaluating any step.
NOTHING_EVALUATED = rule_verdict.NOTHING_EVALUATED


def wants_stop(state: JobState, rule_name: str) -> bool:
    """Whether a firing of ``rule_name`` asks to stop this job (``stoptraining``; prefix must match)."""
    rule = state.rule(rule_name)
    if rule is None:
        return False
    for action in rule.config.actions:
        if action.name == "stoptraining":
            prefix = action.training_job_prefix
            if not prefix or state.name.startswith(prefix):
                return True
    return False


def stop_item(state: JobState, rule_name: str, step: int | None, reason: str) -> OutboxItem:
    path = f"{state.trial_path}/{STOP_SIGNAL_FILE}"
    body = {
        "TrainingJobName": state.name,
        "RuleConfigurationName": rule_name,
        "Step": step,
        "Reason": clip(reason),
    }
    return OutboxItem(f"{state.name}:{state.rules_rev}:stop", "stop", {"path": path, "body": body})


def capture_request(state: JobState, rule_name: str, step: int | None) -> CaptureRequest | None:
    """The capture request of ``rule_name``'s ``capture`` actions (their longest ``steps``, the union of
    their collections), or None when it has none. One id per job, rules revision and rule: the hook serves
    an id once, so a request delivered twice (an outbox retry) captures once."""
    rule = state.rule(rule_name)
    actions = [a for a in (rule.config.actions if rule else ()) if a.name == "capture"]
    if not actions:
        return None
    return CaptureRequest(
        request_id=f"{state.name}:{state.rules_rev}:capture/{rule_name}",
        steps=max(a.steps or 0 for a in actions),
        collections=tuple(sorted({c for a in actions for c in a.collections or ()})),
        rule=rule_name,
        job=state.name,
        step=step,
    )


def capture_path(state: JobState, rule_name: str) -> str:
    """Where ``rule_name``'s capture request for this job goes: next to the job's output, as the stop
    signal (so a request reaches the job it is for, and no other)."""
    return f"{state.trial_path}/{capture_request_file_name(rule_name)}"


def capture_note(request: CaptureRequest, path: str) -> str:
    """The sentence StatusDetails gains when the evaluator asked for a capture (where to look)."""
    return (
        f" Asked the training job for full tensors of {', '.join(request.collections)} at its next "
        f"{request.steps} training steps ({path})."
    )


def capture_item(state: JobState, request: CaptureRequest) -> OutboxItem:
    path = capture_path(state, request.rule)
    return OutboxItem(request.request_id, "capture", {"path": path, "body": request.to_body()})


def issue_extras(state: JobState, outcome: StepOutcome, workers: Sequence[str]) -> list[OutboxItem]:
    """Outbox items caused by one firing (rule, step): the issue event and one alert per notifying action."""
    from tornasole.evaluator.details import issue_detail

    base = f"{state.name}:{state.rules_rev}"
    # a rewritten step's finding is a new issue: its own id (``@<rewrite>``), the first one's kept
    at = f"{outcome.step}" + (f"@{outcome.rewrite}" if outcome.rewrite is not None else "")
    eid = f"{base}:issue/{outcome.rule_name}/{at}"
    detail = issue_detail(
        state,
        outcome.rule_name,
        outcome.step,
        outcome.mode,
        outcome.mode_step,
        outcome.details,
        list(workers),
        eid,
    )
    request = capture_request(state, outcome.rule_name, outcome.step)
    if request is not None:  # where the full tensors the rule's first firing asked for will be
        detail["CaptureRequest"] = {
            "Path": capture_path(state, outcome.rule_name),
            "Steps": request.steps,
            "Collections": list(request.collections),
        }
    items = [
        OutboxItem(
            eid,
            "event",
            {"detail_type": DETAIL_TYPE_RULE_ISSUE_FOUND, "resources": [state.arn], "detail": detail},
        )
    ]
    files = step_files(state.trial_path, outcome.step, list(workers))
    where = (outcome.rule_name, outcome.step, outcome.mode, outcome.mode_step)
    items += alert_items(state, where, outcome.details, outcome.values, files, at)
    return items


def is_rewrite(recorded_ms: int | None, written_ms: int | None) -> bool:
    """Whether a notification of a worker's index file for an evaluated step is a rewrite: S3 says it was
    written after the write evaluated (``recorded_ms``). A re-delivery carries the original ``eventTime``
    (S3 delivers at least once), so it is never one, nor is a late notification of an earlier write.
    Why not the ETag: a resumed run re-saving a step with the same tensors and shapes writes a byte-identical
    index file (same offsets; the values are in the event file), so only the write time tells. Unknown times
    (no S3 record, a step recorded before write times were kept) are not judged."""
    return recorded_ms is not None and written_ms is not None and written_ms > recorded_ms


def alert_items(
    state: JobState,
    where: tuple[str, int | None, str | None, int | None],
    details: str,
    values: dict[str, Any],
    files: dict[str, Any],
    suffix: str,
) -> list[OutboxItem]:
    """One outbox alert per notifying action of the rule (``where``: rule, step, mode, mode step), each
    behind its action's reminder gate; ``suffix`` makes the ids unique per finding (the step)."""
    rule_name, step, mode, mode_step = where
    rule = state.rule(rule_name)
    base = f"{state.name}:{state.rules_rev}"
    items = []
    for i, action in enumerate(rule.config.actions if rule else ()):
        if action.name in ("stoptraining", "capture"):
            continue
        alert_id = f"{base}:alert/{rule_name}/{suffix}/{i}"
        body = firing_alert(state, rule_name, step, mode, mode_step, details, values, files, alert_id)
        payload = {
            "action": action.name,
            "endpoint": action.endpoint,
            "job": state.name,
            # one message per reminder interval for this action of this rule (outbox gate)
            "gate": f"{state.rules_rev}/{rule_name}/{i}",
            "reminder_ms": action.reminder_ms,
            "alert": body,  # rendered at delivery, once the gate says whether it is a reminder
        }
        if action.destination is None:  # email/sms: plain text to the actions topic
            subject, message = text_message(body)
            payload.update(subject=subject, message=message)
        else:  # webhook/slack/teams: the body goes out on the bus, routed by destination
            payload["destination"] = action.destination
        items.append(OutboxItem(alert_id, "alert", payload))
    return items


def after_outcomes(outcomes: Sequence[StepOutcome]):
    """The decision function for a step's outcomes (errors, first firings, stop requests)."""

    def decide(state: JobState) -> Change | None:
        if state.status not in (JobStatus.IN_PROGRESS, JobStatus.STOPPING):
            return None
        for o in sorted(outcomes, key=lambda o: o.rule_name):
            rule = state.rule(o.rule_name)
            if rule is None or rule.status not in EVALUATING:
                continue
            if o.error:  # the rule itself is broken (a step_error is the step's, recorded only)
                why = o.error
                if rule.status == RuleStatus.ISSUES_FOUND:  # Error must not hide what it had found
                    found = f"before that it found issues (first at step {rule.issue_step}): {rule.details}"
                    why = f"{clip(o.error, 600)}; {found}"
                return Change(o.rule_name, RuleStatus.ERROR.value, details=clip(why))
            if o.fired and rule.status == RuleStatus.IN_PROGRESS:
                request = capture_request(state, o.rule_name, o.step)
                if request is None or state.status != JobStatus.IN_PROGRESS:
                    return Change(
                        o.rule_name, RuleStatus.ISSUES_FOUND.value, details=clip(o.details), issue_step=o.step
                    )
                # the first firing asks the job for full tensors (once per rule: IssuesFound is sticky)
                note = capture_note(request, capture_path(state, o.rule_name))
                return Change(
                    o.rule_name,
                    RuleStatus.ISSUES_FOUND.value,
                    details=clip(o.details, MAX_STATUS_DETAILS - len(note)) + note,
                    issue_step=o.step,
                    extra=(capture_item(state, request),),
                )
        if state.status == JobStatus.IN_PROGRESS:
            for o in sorted(outcomes, key=lambda o: o.rule_name):
                if o.fired and not o.error and wants_stop(state, o.rule_name):
                    reason = f"{o.rule_name} fired at step {o.step} with a stoptraining action"
                    return Change(
                        JOB, JobStatus.STOPPING.value, extra=(stop_item(state, o.rule_name, o.step, reason),)
                    )
        return None

    return decide


def ready_to_complete(state: JobState) -> bool:
    """End marker seen and every listed step evaluated or reported incomplete."""
    return (
        state.status in (JobStatus.IN_PROGRESS, JobStatus.STOPPING)
        and state.end_marker_seen
        and state.expected_steps is not None
        and state.steps_evaluated >= state.expected_steps
    )


def completion(
    state: JobState, evaluated: Mapping[str, int], unreadable: Mapping[str, int] | None = None
) -> Change | None:
    """When ``ready_to_complete``: rules still InProgress -> their verdict (``tornasole.rules.verdict``:
    NoIssuesFound, or, having evaluated nothing, NoIssuesFound with ``NothingEvaluated:`` details), then
    the job. ``evaluated`` maps a rule to the number of steps at which it really evaluated its tensors (a
    rule missing from it counts as 0). ``unreadable`` maps a rule to its steps that could not be read
    (corrupt, incomplete): a rule that evaluated nothing and met such a step goes to ``Error``, since its
    data, not the job's configuration, stopped it."""
    if not ready_to_complete(state):
        return None
    for rule in state.rules:
        if rule.status != RuleStatus.IN_PROGRESS:
            continue
        name = rule.config.name
        if rule.config.rule_to_invoke == STALLED_RULE:  # the stalled rule is the clock's
            return Change(name, RuleStatus.NO_ISSUES_FOUND.value, details=f"{name}: no stall found")
        n = evaluated.get(name, 0)
        if rule.config.profiler:  # ``evaluated`` counts the profiler files it folded
            return _profiler_completion(state, name, n)
        found = rule_verdict.verdict(False, n)
        if found != rule_verdict.NOTHING_EVALUATED:
            details = f"{name}: no issues found in {n} evaluated step{'s' * (n != 1)}"
            return Change(name, RuleStatus.NO_ISSUES_FOUND.value, details=details)
        broken = (unreadable or {}).get(name, 0)
        if broken:
            why = (
                f"{name}: evaluated 0 of {state.steps_evaluated} steps: {broken} could not be read "
                f"(corrupt, unreadable or incomplete); see `tornasole jobs logs {state.name} --rule {name}`"
            )
            return Change(name, RuleStatus.ERROR.value, details=clip(why))
        builtin = "" if rule.config.source_s3_uri else rule.config.rule_to_invoke  # custom: needs unknown
        params = rule.config.parameters
        why = rule_verdict.nothing_evaluated_details(name, builtin, params, state.steps_evaluated)
        details = clip(f"{why}; see `tornasole jobs logs {state.name} --rule {name}`")
        return Change(name, rule_verdict.rule_evaluation_status(found), details=details)
    final, reason = ended_as(state)  # Failed / Stopped when SageMaker's own event said so
    return Change(JOB, final.value, failure_reason=reason)


def _profiler_completion(state: JobState, name: str, files: int) -> Change:
    """A profiler rule still InProgress at the end: NoIssuesFound over the files it read, or, having read
    none, NoIssuesFound with ``NothingEvaluated:`` details that say where the files were expected."""
    if files:
        details = f"{name}: no issues found in {files} profiler file{'s' * (files != 1)}"
        return Change(name, RuleStatus.NO_ISSUES_FOUND.value, details=details)
    why = (
        f"{NOTHING_EVALUATED}: {name} read no profiler file: none landed under "
        f"{state.trial_path}/profiler-output/ while the job ran (turn the profiler on: ProfilerConfig, "
        "or the hook's profiler settings)"
    )
    return Change(name, RuleStatus.NO_ISSUES_FOUND.value, details=clip(why))


def stalled(now_s: float):
    """StalledTrainingRule: no new step for ``threshold`` seconds (default 1800) -> IssuesFound."""

    def decide(state: JobState) -> Change | None:
        if state.status != JobStatus.IN_PROGRESS or state.end_marker_seen:
            return None
        idle = now_s - state.last_activity_s
        for rule in state.rules:
            if rule.config.rule_to_invoke != STALLED_RULE or rule.status != RuleStatus.IN_PROGRESS:
                continue
            try:
                threshold = float(rule.config.parameters.get("threshold", "1800"))
            except ValueError:
                return Change(
                    rule.config.name,
                    RuleStatus.ERROR.value,
                    details=f"{STALLED_RULE}: parameter 'threshold' is not a number",
                )
            if idle > threshold:
                details = f"{STALLED_RULE}: no new step for {idle:.0f}s (threshold {threshold:g}s)"
                values = {"value": round(idle, 1), "threshold": threshold}
                files = {"TrialPath": state.trial_path, "IndexFiles": [], "EventFiles": []}
                where = (rule.config.name, None, None, None)
                return Change(
                    rule.config.name,
                    RuleStatus.ISSUES_FOUND.value,
                    details=details,
                    extra=tuple(alert_items(state, where, details, values, files, "stalled")),
                )
        for rule in state.rules:
            stop = rule.config.parameters.get("stop_training_on_fire", "false").lower() in (
                "true",
                "1",
                "yes",
            )
            if (
                rule.config.rule_to_invoke == STALLED_RULE
                and rule.status == RuleStatus.ISSUES_FOUND
                and (stop or wants_stop(state, rule.config.name))
            ):
                reason = f"{rule.config.name}: training stalled"
                return Change(
                    JOB, JobStatus.STOPPING.value, extra=(stop_item(state, rule.config.name, None, reason),)
                )
        return None

    return decide

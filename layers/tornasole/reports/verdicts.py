"""The verdicts a report shows: from a registered job's state, or from the recommended set run locally.

Either way each rule becomes one :class:`Verdict` (its RuleEvaluationStatus, the verdict the CLI shows,
the steps where it fired, the finding and the rule's likely cause and suggested fix, split as
``tornasole jobs status`` splits them), so the page renders both the same way. Profiler rules are told
apart by the rule they invoke (:data:`PROFILER_RULES`: SageMaker's built-in profiler rule names) and go
to the profiler section; whatever status they have is rendered as is.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tornasole.rules.outcome import split_advice
from tornasole.rules.profiler import profiler_rule_names
from tornasole.rules.verdict import (
    nothing_evaluated_details,
    rule_evaluation_status,
    verdict,
    verdict_of_status,
)

__all__ = ["PROFILER_RULES", "JobInfo", "Verdict", "evaluate_recommended", "from_job_detail"]

log = logging.getLogger(__name__)

#: SageMaker Debugger's built-in profiler rules, as the profiler rules' registry names them.
PROFILER_RULES = frozenset(profiler_rule_names())
_CAUSE, _FIX = "Likely cause: ", ". Suggested fix: "
#: Firing steps listed per rule (the count is always given).
MAX_FIRED_LISTED = 200


@dataclass(frozen=True)
class Verdict:
    name: str
    rule: str
    status: str
    verdict: str
    details: str
    fired_steps: tuple[int, ...] = ()
    fired_count: int = 0

    @property
    def finding(self) -> str:
        return split_advice(self.details)[0]

    @property
    def cause_and_fix(self) -> tuple[str, str]:
        advice = split_advice(self.details)[1]
        if not advice.startswith(_CAUSE):
            return "", advice
        body = advice[len(_CAUSE) :].rstrip(".")
        cause, _, fix = body.partition(_FIX)
        return cause, fix

    @property
    def is_profiler(self) -> bool:
        return self.rule in PROFILER_RULES or self.name in PROFILER_RULES


@dataclass(frozen=True)
class JobInfo:
    """The job facts at the top of the report (a local trial has no registered job: ``name`` None)."""

    name: str | None
    status: str
    trial_path: str
    creation_ms: int | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    failure_reason: str | None = None
    source: str = "job"
    notes: tuple[str, ...] = field(default_factory=tuple)


def _ms(value: Any) -> int | None:
    try:
        return None if value in (None, "") else int(value)
    except (TypeError, ValueError):
        return None


def _fired(steps: Sequence[int]) -> tuple[tuple[int, ...], int]:
    ordered = sorted(set(int(s) for s in steps))
    return tuple(ordered[:MAX_FIRED_LISTED]), len(ordered)


def from_job_detail(
    detail: Mapping[str, Any], fired: Mapping[str, Sequence[int]]
) -> tuple[JobInfo, list[Verdict]]:
    """A job's ``describe(datetimes=False)`` detail (or a state-change event's) and its firing steps."""
    configs = [
        *(detail.get("DebugRuleConfigurations") or []),
        *(detail.get("ProfilerRuleConfigurations") or []),
    ]
    invoked = {
        c.get("RuleConfigurationName"): (c.get("RuleParameters") or {}).get("rule_to_invoke", "")
        for c in configs
    }
    statuses = [
        *(detail.get("DebugRuleEvaluationStatuses") or []),
        *(detail.get("ProfilerRuleEvaluationStatuses") or []),
    ]
    out = []
    for s in statuses:
        name = str(s.get("RuleConfigurationName", ""))
        status = str(s.get("RuleEvaluationStatus", ""))
        details = str(s.get("StatusDetails") or "")
        steps, count = _fired(fired.get(name, ()))
        out.append(
            Verdict(
                name,
                str(invoked.get(name) or name),
                status,
                verdict_of_status(status, details),
                details,
                steps,
                count,
            )
        )
    hook = detail.get("DebugHookConfig") or {}
    info = JobInfo(
        name=str(detail.get("TrainingJobName")),
        status=str(detail.get("TrainingJobStatus", "")),
        trial_path=str(hook.get("S3OutputPath") or ""),
        creation_ms=_ms(detail.get("CreationTime")),
        start_ms=_ms(detail.get("TrainingStartTime")),
        end_ms=_ms(detail.get("TrainingEndTime")),
        failure_reason=detail.get("FailureReason"),
    )
    return info, out


def evaluate_recommended(trial: Any, configs: Sequence[Mapping[str, Any]] | None = None) -> list[Verdict]:
    """Run each rule of ``configs`` (the recommended set when None) over the trial's saved steps, as
    ``tornasole invoke`` does; a rule that cannot be built or raises is an ``Error`` verdict saying why."""
    from tornasole.rules import create_rule, recommended_rules
    from tornasole.rules.step_loop import invoke_rule

    steps = trial.steps()
    end = (steps[-1] + 1) if steps else 0
    out = []
    for config in configs if configs is not None else recommended_rules():
        name = str(config["RuleConfigurationName"])
        params = {k: v for k, v in dict(config.get("RuleParameters") or {}).items() if k != "rule_to_invoke"}
        rule = str((config.get("RuleParameters") or {}).get("rule_to_invoke", name))
        try:
            summary = invoke_rule(create_rule(rule, trial, **params), 0, end)
        except Exception as exc:  # noqa: BLE001 - one rule's failure is its verdict, the others go on
            log.info("rule %s raised", name, exc_info=True)
            out.append(Verdict(name, rule, "Error", "Error", f"{name}: {type(exc).__name__}: {exc}"))
            continue
        found = verdict(bool(summary.fired), summary.steps_evaluated)
        if summary.fired:
            details = summary.fired[0].details
        elif summary.steps_evaluated:
            n = summary.steps_evaluated
            details = f"{name}: no issues found in {n} evaluated step{'s' * (n != 1)}"
        else:
            details = nothing_evaluated_details(name, rule, params, len(steps))
        fired_steps, count = _fired([o.step for o in summary.fired])
        out.append(Verdict(name, rule, rule_evaluation_status(found), found, details, fired_steps, count))
    return out

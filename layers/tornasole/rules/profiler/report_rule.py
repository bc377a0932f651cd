"""ProfilerReport: every other profiler rule at once, their findings aggregated.

SageMaker's ProfilerReport runs the built-in profiler rules and writes their findings into one report;
its parameters customise the others as ``<RuleName>_<parameter>`` (the rule name in any case), the
scheme the SDK's ``rule_configs.ProfilerReport`` validates. AWS: ProfilerReport
(https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-profiler-rules.html). Here it fires
when any of the rules it runs fires, with each one's finding and advice in its details.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tornasole.exceptions import RuleParameterError
from tornasole.profiler.format.system_records import SystemRecord
from tornasole.profiler.format.trace_events import TraceFile
from tornasole.rules.profiler.base import FRAMEWORK, SYSTEM, ProfilerFinding, ProfilerRule, Sample, samples_of
from tornasole.rules.profiler.framework_rules import (
    Dataloader,
    MaxInitializationTime,
    OverallFrameworkMetrics,
    StepOutlier,
)
from tornasole.rules.profiler.system_rules import (
    BatchSize,
    CPUBottleneck,
    GPUMemoryIncrease,
    IOBottleneck,
    LoadBalancing,
    LowGPUUtilization,
    OverallSystemUsage,
)

__all__ = ["ProfilerReport", "REPORTED_RULES"]

#: The rules ProfilerReport runs, in its report's order.
REPORTED_RULES: tuple[type[ProfilerRule], ...] = (
    BatchSize,
    CPUBottleneck,
    Dataloader,
    GPUMemoryIncrease,
    IOBottleneck,
    LoadBalancing,
    LowGPUUtilization,
    MaxInitializationTime,
    OverallFrameworkMetrics,
    OverallSystemUsage,
    StepOutlier,
)
_BY_LOWER = {cls.NAME.lower(): cls for cls in REPORTED_RULES}


class ProfilerReport(ProfilerRule):
    """Runs the other eleven rules (parameters ``<RuleName>_<parameter>``); fires when any fires."""

    NAME = "ProfilerReport"
    KINDS = frozenset({SYSTEM, FRAMEWORK})
    PARAMETERS = ()
    CAUSE = "see each rule's finding"
    FIX = "see each rule's suggested fix"
    SUMMARY = "runs every profiler rule (parameters <RuleName>_<parameter>); fires when any fires"

    def __init__(self, **params: Any) -> None:
        self.params = {}
        grouped: dict[type[ProfilerRule], dict[str, Any]] = {cls: {} for cls in REPORTED_RULES}
        keys: dict[tuple[type[ProfilerRule], str], str] = {}
        for key, value in params.items():
            if key in ("rule_to_invoke", "action_json"):
                continue
            rule, sep, parameter = key.partition("_")
            cls = _BY_LOWER.get(rule.lower())
            if not sep or not parameter:
                raise RuleParameterError(self.NAME, key, "does not follow the scheme <RuleName>_<parameter>")
            if cls is None:
                names = ", ".join(c.NAME for c in REPORTED_RULES)
                raise RuleParameterError(self.NAME, key, f"names no profiler rule ({rule!r}); rules: {names}")
            grouped[cls][parameter.lower()] = value
            keys[(cls, parameter.lower())] = key
        self.rules = []
        for cls in REPORTED_RULES:
            try:
                self.rules.append(cls(**grouped[cls]))
            except RuleParameterError as exc:  # named as the user wrote it: <RuleName>_<parameter>
                key = keys.get((cls, exc.parameter or ""), cls.NAME)
                text = str(exc).split(": ", 1)[-1].removeprefix(f"parameter {exc.parameter!r} ")
                raise RuleParameterError(self.NAME, key, text) from None

    @classmethod
    def parse(cls, raw: Any) -> dict[str, Any]:
        cls(**dict(raw))
        return dict(raw)

    def initial_state(self) -> dict[str, Any]:
        return {rule.NAME: rule.initial_state() for rule in self.rules}

    def update(
        self,
        state: dict[str, Any],
        kind: str,
        payload: Sequence[SystemRecord] | TraceFile,
        samples: list[Sample] | None = None,
    ) -> None:
        if kind == SYSTEM and samples is None:
            samples = samples_of(payload)  # type: ignore[arg-type]  # grouped once for the eleven rules
        for rule in self.rules:
            rule.update(state.setdefault(rule.NAME, rule.initial_state()), kind, payload, samples)

    def findings(self, state: dict[str, Any]) -> list[ProfilerFinding]:
        return [rule.finding(state.get(rule.NAME, rule.initial_state())) for rule in self.rules]

    def finding(self, state: dict[str, Any]) -> ProfilerFinding:
        found = self.findings(state)
        fired = [f for f in found if f.fired]
        values = {f.rule: {"fired": f.fired, "details": f.details[:300]} for f in found}
        if fired:
            listed = " | ".join(f.details for f in fired)
            return ProfilerFinding(
                self.NAME,
                True,
                f"{self.NAME}: {len(fired)} of {len(found)} rules found issues: {listed}",
                values,
            )
        return ProfilerFinding(
            self.NAME, False, f"{self.NAME}: none of {len(found)} rules found issues", values
        )

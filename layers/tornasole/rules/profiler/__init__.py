"""SageMaker's built-in profiler rules, evaluated file by file with a bounded state.

Each rule (``PROFILER_RULES``) consumes the records of ONE new profiler file at a time, decoded by
:mod:`tornasole.profiler.format`, and carries a small JSON state to the next file
(:class:`~tornasole.rules.profiler.base.ProfilerRule`): the evaluator stores that state in the job's
DynamoDB items (``tornasole.evaluator.profiler_files``). Names, parameters and defaults are
SageMaker's (https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-profiler-rules.html).

Floor plan: part of ``tornasole.rules``; imports ``tornasole.profiler.format`` and ``rules.params`` /
``rules.outcome``, never the evaluator.
"""

from __future__ import annotations

from typing import Any

from tornasole.exceptions import RuleParameterError
from tornasole.rules.profiler.base import (
    FRAMEWORK,
    SYSTEM,
    ProfilerFinding,
    ProfilerRule,
)
from tornasole.rules.profiler.report_rule import REPORTED_RULES, ProfilerReport

__all__ = [
    "FRAMEWORK",
    "SYSTEM",
    "PROFILER_RULES",
    "ProfilerFinding",
    "ProfilerRule",
    "ProfilerReport",
    "create_profiler_rule",
    "profiler_rule_names",
]

#: Every built-in profiler rule by SageMaker's name.
PROFILER_RULES: dict[str, type[ProfilerRule]] = {
    cls.NAME: cls for cls in sorted((ProfilerReport, *REPORTED_RULES), key=lambda c: c.NAME)
}


def profiler_rule_names() -> list[str]:
    return sorted(PROFILER_RULES)


def create_profiler_rule(name: str, parameters: dict[str, Any] | None = None) -> ProfilerRule:
    """The rule ``name`` with ``parameters`` (strings or values); errors name the rule and parameter."""
    cls = PROFILER_RULES.get(name)
    if cls is None:
        raise RuleParameterError(
            name, None, f"is not a built-in profiler rule; profiler rules: {', '.join(profiler_rule_names())}"
        )
    return cls(**(parameters or {}))

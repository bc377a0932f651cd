"""Rule configurations of both shapes -> ``RuleConfig``, and why a rule cannot run.

The work is done in ``tornasole.evaluator.registration.job_config`` (shapes) and
``tornasole.evaluator.registration.job_limits`` (validation), shared with the evaluator's
``tornasole_job.json`` handler; this module is the user-facing name for it.
"""

from __future__ import annotations

from tornasole.evaluator.models import RuleConfig, rule_source_problem
from tornasole.evaluator.registration.job_config import (
    RESERVED,
    from_debug_rule_configuration,
    from_rules_specification,
    normalise_rules,
)
from tornasole.evaluator.registration.rule_checks import builtin_rule_problems

__all__ = [
    "RESERVED",
    "from_debug_rule_configuration",
    "from_rules_specification",
    "normalise_rules",
    "validate_rule",
]


def validate_rule(rule: RuleConfig, allowed_prefixes: tuple[str, ...] | None = None) -> str | None:
    """Why this rule cannot run (unknown name or parameter, bad value, source outside the allowed
    prefixes), or None when it can."""
    if rule.source_s3_uri:
        return rule_source_problem(rule, allowed_prefixes)
    problems = builtin_rule_problems(rule)
    return "; ".join(problems) if problems else None

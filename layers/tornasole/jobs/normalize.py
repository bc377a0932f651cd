"""Normalise rule configurations of both shapes into ``RuleConfig``; validate them.

Two shapes reach us:

* SageMaker's ``DebugRuleConfigurations`` entry: ``RuleConfigurationName``,
  ``RuleEvaluatorImage``, ``RuleParameters`` (a string map holding
  ``rule_to_invoke``, ``source_s3_uri`` for custom rules, ``other_trial_N``,
  ``start_step``, ``end_step``, ``action_json``, and the rule's own parameters);
* the 2019 Tornasole ``rules_specification`` entry: ``RuleName``,
  ``SourceS3Uri``, ``RuntimeConfigurations`` (``start-step``, ``end-step``,
  ``other-trials-paths`` as a ``;``-separated list, ``logging-level``, and the
  rule's own string parameters).

Structural problems (not a list, no name, a step that is not an integer) raise
``ConfigurationError``; a rule that cannot run (unknown name, bad parameter,
custom source outside the allowed prefixes) is reported by ``validate_rule``
so registration can record it as that rule's ``Error`` without failing the job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from tornasole.evaluator.models import RuleConfig, rule_source_problem
from tornasole.exceptions import ConfigurationError
from tornasole.rules.actions import Action, parse_actions

__all__ = [
    "RESERVED",
    "from_debug_rule_configuration",
    "from_rules_specification",
    "normalise_rules",
    "validate_rule",
]

# RuleParameters keys the evaluator interprets itself (never passed to the rule's constructor).
RESERVED = frozenset(
    {"rule_to_invoke", "source_s3_uri", "start_step", "end_step", "action_json", "logging_level"}
)
_OTHER_TRIAL = re.compile(r"^other_trials?(_\d+)?$")


def _int(value: Any, what: str) -> int | None:
    if value is None or str(value).strip() in ("", "None", "none", "null"):
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        raise ConfigurationError(f"{what}={value!r} is not an integer step") from None


def _actions(rule: str, raw: Any) -> tuple[Action, ...]:
    if raw in (None, "", [], {}):
        return ()
    return parse_actions(rule, raw)


def _split_trials(value: Any) -> list[str]:
    items = value if isinstance(value, (list, tuple)) else re.split(r"[;,]", str(value))
    return [str(p).strip() for p in items if str(p).strip()]


def from_debug_rule_configuration(entry: Mapping[str, Any]) -> RuleConfig:
    """One SageMaker ``DebugRuleConfigurations`` entry -> ``RuleConfig``."""
    name = str(entry.get("RuleConfigurationName") or "").strip()
    if not name:
        raise ConfigurationError(f"rule configuration without RuleConfigurationName: {dict(entry)!r}")
    raw = {str(k): "" if v is None else str(v) for k, v in (entry.get("RuleParameters") or {}).items()}
    others: list[str] = []
    params: dict[str, str] = {}
    for key in sorted(raw, key=lambda k: (len(k), k)):
        if _OTHER_TRIAL.match(key):
            others.extend(_split_trials(raw[key]))
        elif key not in RESERVED:
            params[key] = raw[key]
    return RuleConfig(
        name=name,
        rule_to_invoke=raw.get("rule_to_invoke") or name,
        parameters=params,
        source_s3_uri=raw.get("source_s3_uri") or None,
        other_trials=tuple(others),
        start_step=_int(raw.get("start_step"), f"{name}: start_step"),
        end_step=_int(raw.get("end_step"), f"{name}: end_step"),
        actions=_actions(name, raw.get("action_json")),
        logging_level=raw.get("logging_level") or None,
        evaluator_image=str(entry.get("RuleEvaluatorImage") or "tornasole"),
        rule_parameters=raw,
    )


def from_rules_specification(entry: Mapping[str, Any]) -> RuleConfig:
    """One 2019 ``rules_specification`` entry -> ``RuleConfig`` (via the SageMaker shape)."""
    name = str(entry.get("RuleName") or "").strip()
    if not name:
        raise ConfigurationError(f"rules_specification entry without RuleName: {dict(entry)!r}")
    runtime = {
        str(k): "" if v is None else str(v) for k, v in (entry.get("RuntimeConfigurations") or {}).items()
    }
    params: dict[str, str] = {"rule_to_invoke": name}
    if entry.get("SourceS3Uri"):
        params["source_s3_uri"] = str(entry["SourceS3Uri"])
    for key, value in runtime.items():
        if key == "other-trials-paths":
            for i, p in enumerate(_split_trials(value)):
                params[f"other_trial_{i}"] = p
        elif key in ("start-step", "end-step", "logging-level"):
            params[key.replace("-", "_")] = value
        else:
            params[key] = value
    return from_debug_rule_configuration({"RuleConfigurationName": name, "RuleParameters": params})


def normalise_rules(rules: Any) -> tuple[RuleConfig, ...]:
    """Rules in any accepted form -> ``RuleConfig`` tuple; names must be unique.

    Accepts ``RuleConfig`` objects, builder objects (``tornasole.jobs.Rule``), SageMaker
    ``DebugRuleConfigurations`` dicts, 2019 ``rules_specification`` dicts, or a whole
    configuration dict holding either list.
    """
    if isinstance(rules, Mapping):
        rules = rules.get("DebugRuleConfigurations") or rules.get("rules_specification") or []
    if isinstance(rules, (str, bytes)) or not isinstance(rules, Iterable):
        raise ConfigurationError(f"rules must be a list of rule configurations, got {type(rules).__name__}")
    out: list[RuleConfig] = []
    for entry in rules:
        if isinstance(entry, RuleConfig):
            out.append(entry)
        elif hasattr(entry, "to_debugger_rule_config_dict"):
            out.append(from_debug_rule_configuration(entry.to_debugger_rule_config_dict()))
        elif isinstance(entry, Mapping) and "RuleConfigurationName" in entry:
            out.append(from_debug_rule_configuration(entry))
        elif isinstance(entry, Mapping) and "RuleName" in entry:
            out.append(from_rules_specification(entry))
        else:
            raise ConfigurationError(f"not a rule configuration: {entry!r}")
    names = [r.name for r in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigurationError(f"rule configuration names must be unique; repeated: {dupes}")
    bad = [n for n in names if n.startswith("@") or "#" in n]
    if bad:
        raise ConfigurationError(f"rule configuration names may not start with '@' or contain '#': {bad}")
    return tuple(out)


def validate_rule(rule: RuleConfig, allowed_prefixes: tuple[str, ...] | None = None) -> str | None:
    """Why this rule cannot run (becomes its ``Error`` StatusDetails), or None when it can."""
    if rule.source_s3_uri:
        return rule_source_problem(rule, allowed_prefixes)
    try:
        from tornasole.rules.registry import get_rule

        cls = get_rule(rule.rule_to_invoke)
        if hasattr(cls, "PARAMETERS"):
            from tornasole.rules.params import parse_params

            parse_params(cls, dict(rule.parameters))
    except (ValueError, KeyError) as exc:
        return f"{rule.name}: {exc}"
    return None

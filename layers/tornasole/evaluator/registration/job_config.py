"""Rule configurations of every accepted shape -> ``RuleConfig`` (pure; no I/O).

Two shapes reach the evaluator:

* SageMaker's ``DebugRuleConfigurations`` entry: ``RuleConfigurationName``,
  ``RuleEvaluatorImage``, ``InstanceType``, ``VolumeSizeInGB``,
  ``RuleParameters`` (a map holding ``rule_to_invoke``, ``source_s3_uri`` for
  custom rules, ``other_trial_N``, ``start_step``, ``end_step``,
  ``action_json``, and the rule's own parameters);
* the 2019 Tornasole ``rules_specification`` entry: ``RuleName``,
  ``SourceS3Uri``, ``RuntimeConfigurations`` (``start-step``, ``end-step``,
  ``other-trials-paths`` as a ``;``-separated list, ``logging-level``, and the
  rule's own parameters).

What the SageMaker SDK (2.x) really sends is accepted on purpose: parameter
values that are JSON numbers or booleans (``num_steps: 20``) become their text,
and ``action_json`` may carry backslash-escaped quotes (``[{\\"name\\": ...}]``)
or be a JSON string holding JSON. Anything structurally wrong raises
``InvalidJobConfiguration`` naming the rule and the field; whether a rule can
run (name, parameters, limits) is ``job_limits``' business.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from tornasole.evaluator.models import RuleConfig
from tornasole.exceptions import InvalidJobConfiguration, RuleParameterError
from tornasole.rules.actions import Action, parse_actions

__all__ = [
    "RESERVED",
    "decode_action_json",
    "from_debug_rule_configuration",
    "from_rules_specification",
    "normalise_profiler_rules",
    "normalise_rules",
    "parameter_text",
]

# RuleParameters keys the evaluator interprets itself (never passed to the rule's constructor).
RESERVED = frozenset(
    {"rule_to_invoke", "source_s3_uri", "start_step", "end_step", "action_json", "logging_level"}
)
# Every spelling a rule reads other trials from (``rules.params``, ``rules.registry``): all of them are
# other trials here, so that where they point is checked (a job file may not leave its own trial).
_OTHER_TRIAL = re.compile(r"^other[_-]trials?(_\d+|[_-]paths)?$")
# Steps are stored as 12-digit keys: larger ones cannot be laid out.
MAX_STEP = 10**12 - 1


def parameter_text(rule: str, key: str, value: Any) -> str:
    """A ``RuleParameters`` value as the text SageMaker's API carries (numbers and booleans allowed).

    Examples
    --------
    >>> parameter_text("R", "num_steps", 20), parameter_text("R", "diff_percent", 0.5)
    ('20', '0.5')
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidJobConfiguration(f"rule {rule!r}: parameter {key!r}={value!r} is not finite")
        return repr(value) if value != int(value) or abs(value) >= 1e16 else str(int(value))
    raise InvalidJobConfiguration(
        f"rule {rule!r}: parameter {key!r} must be a string or a number, got {type(value).__name__}"
    )


def _step(rule: str, key: str, value: str) -> int | None:
    text = value.strip()
    if text in ("", "None", "none", "null"):
        return None
    try:
        step = int(text)
    except ValueError:
        raise InvalidJobConfiguration(f"rule {rule!r}: {key}={value!r} is not an integer step") from None
    if not 0 <= step <= MAX_STEP:
        raise InvalidJobConfiguration(f"rule {rule!r}: {key}={value!r} must be between 0 and {MAX_STEP}")
    return step


def decode_action_json(rule: str, raw: Any) -> tuple[Action, ...]:
    """``action_json`` as any client writes it -> actions.

    Accepted: a JSON list/object; the same with backslash-escaped quotes (what
    the SageMaker SDK 2.x sends); a JSON string whose content is JSON; a list or
    dict already parsed. Errors name the rule and ``action_json``.
    """
    if raw in (None, "", [], {}):
        return ()
    try:
        return parse_actions(rule, _unquote(raw))
    except RuleParameterError as exc:
        raise InvalidJobConfiguration(str(exc)) from exc


def _unquote(raw: Any) -> Any:
    """Peel escaped quotes / JSON-string layers off an ``action_json`` text (a few layers at most)."""
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    for _ in range(3):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            if '\\"' not in text:
                return text
            try:
                value = json.loads(f'"{text}"')  # the text is the body of a JSON string literal
            except json.JSONDecodeError:
                return text
        if not isinstance(value, str):
            return value
        text = value.strip()
    return text


def _split_trials(value: Any) -> list[str]:
    items = value if isinstance(value, (list, tuple)) else re.split(r"[;,]", str(value))
    return [str(p).strip() for p in items if str(p).strip()]


def _mapping(rule: str, what: str, value: Any) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidJobConfiguration(f"rule {rule!r}: {what} must be an object, got {type(value).__name__}")
    return value


def from_debug_rule_configuration(entry: Mapping[str, Any]) -> RuleConfig:
    """One SageMaker ``DebugRuleConfigurations`` entry -> ``RuleConfig``."""
    name = entry.get("RuleConfigurationName")
    if not isinstance(name, str) or not name.strip():
        raise InvalidJobConfiguration(
            f"rule configuration without a RuleConfigurationName (a non-empty string): {_short(entry)}"
        )
    name = name.strip()
    given = _mapping(name, "RuleParameters", entry.get("RuleParameters"))
    raw = {str(k): parameter_text(name, str(k), v) for k, v in given.items()}
    others: list[str] = []
    params: dict[str, str] = {}
    for key in sorted(raw, key=lambda k: (len(k), k)):
        if _OTHER_TRIAL.match(key):
            others.extend(_split_trials(raw[key]))
        elif key not in RESERVED:
            params[key] = raw[key]
    volume = entry.get("VolumeSizeInGB")
    if volume is not None and (isinstance(volume, bool) or not isinstance(volume, int) or volume < 0):
        raise InvalidJobConfiguration(f"rule {name!r}: VolumeSizeInGB={volume!r} is not a size in GB")
    target = raw.get("rule_to_invoke") or name
    if not raw.get("source_s3_uri"):  # an alias (UnchangedWeights) is stored as its rule and presets
        from tornasole.rules.registry import resolve_alias

        target, params = resolve_alias(target, params)
        raw = {**{k: v for k, v in params.items() if k not in raw}, **raw, "rule_to_invoke": target}
    return RuleConfig(
        name=name,
        rule_to_invoke=target,
        parameters=params,
        source_s3_uri=raw.get("source_s3_uri") or None,
        other_trials=tuple(others),
        start_step=_step(name, "start_step", raw.get("start_step", "")),
        end_step=_step(name, "end_step", raw.get("end_step", "")),
        actions=decode_action_json(name, raw.get("action_json")),
        logging_level=raw.get("logging_level") or None,
        evaluator_image=str(entry.get("RuleEvaluatorImage") or "tornasole"),
        rule_parameters=raw,
        instance_type=str(entry["InstanceType"]) if entry.get("InstanceType") else None,
        volume_size_in_gb=volume,
    )


def from_rules_specification(entry: Mapping[str, Any]) -> RuleConfig:
    """One 2019 ``rules_specification`` entry -> ``RuleConfig`` (via the SageMaker shape)."""
    name = entry.get("RuleName")
    if not isinstance(name, str) or not name.strip():
        raise InvalidJobConfiguration(f"rules_specification entry without a RuleName: {_short(entry)}")
    name = name.strip()
    runtime = {
        str(k): parameter_text(name, str(k), v)
        for k, v in _mapping(name, "RuntimeConfigurations", entry.get("RuntimeConfigurations")).items()
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


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def normalise_rules(rules: Any) -> tuple[RuleConfig, ...]:
    """Rules in any accepted form -> ``RuleConfig`` tuple; names must be unique.

    Accepts ``RuleConfig`` objects, builder objects (anything with
    ``to_debugger_rule_config_dict()``, as the SageMaker SDK's ``Rule``),
    SageMaker ``DebugRuleConfigurations`` dicts, 2019 ``rules_specification``
    dicts, or a whole configuration dict holding either list.
    """
    if isinstance(rules, Mapping):
        rules = rules.get("DebugRuleConfigurations") or rules.get("rules_specification") or []
    if isinstance(rules, (str, bytes)) or not isinstance(rules, Iterable):
        raise InvalidJobConfiguration(
            f"rules must be a list of rule configurations, got {type(rules).__name__}"
        )
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
            raise InvalidJobConfiguration(f"not a rule configuration: {_short(entry)}")
    names = [r.name for r in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InvalidJobConfiguration(f"rule configuration names must be unique; repeated: {dupes}")
    return tuple(out)


def normalise_profiler_rules(rules: Any) -> tuple[RuleConfig, ...]:
    """SageMaker's ``ProfilerRuleConfigurations`` (the entries ``ProfilerRule.sagemaker(...)`` sends, the
    same shape as ``DebugRuleConfigurations``) -> ``RuleConfig`` tuple marked ``profiler``."""
    import dataclasses

    if rules in (None, [], ()):
        return ()
    if isinstance(rules, (str, bytes, Mapping)) or not isinstance(rules, Iterable):
        raise InvalidJobConfiguration(
            f"ProfilerRuleConfigurations must be a list of rule configurations, got {type(rules).__name__}"
        )
    out = []
    for entry in rules:
        if hasattr(entry, "to_profiler_rule_config_dict"):
            entry = entry.to_profiler_rule_config_dict()
        if not isinstance(entry, Mapping) or "RuleConfigurationName" not in entry:
            raise InvalidJobConfiguration(f"not a profiler rule configuration: {_short(entry)}")
        out.append(dataclasses.replace(from_debug_rule_configuration(entry), profiler=True))
    return tuple(out)

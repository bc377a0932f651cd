"""Whether a built-in rule can run as configured: its name and its parameters (pure).

Why separate from the limits: these checks need the rule catalogue
(``tornasole.rules.registry``) and each rule's declared ``PARAMETERS``; a
problem says what is valid ("did you mean", the valid names, the parameters
with their kinds and defaults), so one round trip fixes it.
"""

from __future__ import annotations

import difflib
from typing import Any

from tornasole.evaluator.models import RuleConfig
from tornasole.exceptions import RuleParameterError

__all__ = ["builtin_rule_problems", "profiler_rule_problems"]

_KIND_WORDS = {
    "str": "a string",
    "float": "a number",
    "int": "an integer",
    "bool": "true or false",
    "regex": "a regular expression",
    "mode": "a mode (TRAIN, EVAL, PREDICT, GLOBAL)",
    "str_list": "a comma-separated list of strings",
    "float_list": "a comma-separated list of numbers",
    "int_list": "a comma-separated list of integers",
}


def _suggest(word: str, choices: list[str]) -> str:
    lower = {c.lower(): c for c in choices}
    close = [lower[word.lower()]] if word.lower() in lower else []
    close += [c for c in difflib.get_close_matches(word, choices, n=3, cutoff=0.6) if c not in close]
    return f"did you mean {' or '.join(repr(c) for c in close[:3])}? " if close else ""


def _default_text(p: Any) -> str:
    if p.required:
        return "required"
    return f"default {p.default}" if p.default is not None else "unset"


def builtin_rule_problems(rule: RuleConfig) -> list[str]:
    """Why a built-in rule cannot run: unknown name or parameter, or a value of the wrong type."""
    if rule.source_s3_uri:
        return []  # a custom rule: its class and parameters are known only when its file is loaded
    if rule.profiler:
        return profiler_rule_problems(rule)
    from tornasole.rules.params import parse_value
    from tornasole.rules.registry import BUILTIN_RULES, get_rule

    target = rule.rule_to_invoke
    if target not in BUILTIN_RULES:
        names = sorted(BUILTIN_RULES)
        return [
            f"rule {rule.name!r}: {target!r} is not a built-in rule; {_suggest(target, names)}"
            f"built-in rules: {', '.join(names)} (a custom rule needs source_s3_uri)"
        ]
    cls = get_rule(target)
    declared = {p.name: p for p in getattr(cls, "PARAMETERS", ())}
    listing = "; ".join(f"{p.name} ({p.kind}, {_default_text(p)})" for p in declared.values()) or "(none)"
    problems = []
    for key, value in rule.parameters.items():
        p = declared.get(key)
        if p is None:
            problems.append(
                f"rule {rule.name!r} ({target}): {key!r} is not a parameter of {target}; "
                f"{_suggest(key, list(declared))}valid parameters: {listing}"
            )
            continue
        try:
            parsed = parse_value(target, p, value)
        except RuleParameterError as exc:
            why = f": {str(exc).split(' is ', 1)[-1]}" if p.kind == "regex" else ""  # unsafe, or invalid
            problems.append(
                f"rule {rule.name!r} ({target}): parameter {key!r}={value!r} is not "
                f"{_KIND_WORDS.get(p.kind, p.kind)}{why}"
            )
            continue
        if parsed is None and p.required:
            problems.append(
                f"rule {rule.name!r} ({target}): parameter {key!r} is required and cannot be empty"
            )
    for p in declared.values():
        if p.required and p.name not in rule.parameters:
            problems.append(f"rule {rule.name!r} ({target}): parameter {p.name!r} is required ({p.help})")
    return problems


def profiler_rule_problems(rule: RuleConfig) -> list[str]:
    """Why a profiler rule cannot run: not one of SageMaker's profiler rules, an unknown parameter or a bad
    value (each problem names the rule and the parameter), or fields only tensor rules have."""
    from tornasole.rules.profiler import PROFILER_RULES, create_profiler_rule

    target = rule.rule_to_invoke
    if rule.source_s3_uri:
        return [f"profiler rule {rule.name!r}: custom profiler rules are not supported (source_s3_uri)"]
    if target not in PROFILER_RULES:
        names = sorted(PROFILER_RULES)
        return [
            f"profiler rule {rule.name!r}: {target!r} is not a built-in profiler rule; "
            f"{_suggest(target, names)}profiler rules: {', '.join(names)}"
        ]
    problems = []
    if rule.other_trials or rule.start_step is not None or rule.end_step is not None:
        problems.append(
            f"profiler rule {rule.name!r} ({target}): other trials and start/end steps apply to tensor "
            "rules only"
        )
    try:
        create_profiler_rule(target, rule.parameters)
    except RuleParameterError as exc:
        problems.append(f"profiler rule {rule.name!r} ({target}): {exc}")
    return problems

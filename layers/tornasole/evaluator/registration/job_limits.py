"""Every limit a job registration must respect, checked before anything is written (pure).

Why up front: a registration that cannot work must fail where the user is
(a non-zero CLI exit, an exception from ``register_job``, a recorded failure
for a ``tornasole_job.json``), never as a rule that silently sits in ``Error``
or a handler crashing into the dead-letter queue. Each problem names the
rule, parameter or field, and says what is valid ("did you mean").

The limits come from where the job is stored: registration is ONE DynamoDB
transaction (at most 100 items) of the job, its trial mapping, its registry
entry, its InProgress event and one item per rule; an item holds at most
400 KB; step keys have 12 digits.
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Mapping
from typing import Any

from tornasole.alerts.destinations import configured_destinations, destination_problems
from tornasole.evaluator.models import RuleConfig
from tornasole.evaluator.registration.rule_checks import builtin_rule_problems
from tornasole.exceptions import InvalidJobConfiguration, TornasoleValueError
from tornasole.safe_regex import regex_problem

__all__ = [
    "JOB_NAME_PATTERN",
    "MAX_COLLECTIONS",
    "MAX_HOOK_CONFIG_BYTES",
    "MAX_JOB_FILE_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_PARAMETERS_PER_RULE",
    "MAX_PARAMETER_KEY_LENGTH",
    "MAX_PARAMETER_VALUE_LENGTH",
    "MAX_RULES_PER_JOB",
    "MAX_RULES_PARAMETERS_BYTES",
    "MAX_RULE_PARAMETERS_BYTES",
    "MAX_IDLE_TIMEOUT_S",
    "MAX_RULE_NAME_LENGTH",
    "MIN_IDLE_TIMEOUT_S",
    "MAX_WORKERS",
    "REGISTRATION_FIXED_ITEMS",
    "TRANSACTION_MAX_ITEMS",
    "builtin_rule_problems",
    "check_idle_timeout",
    "check_job",
    "hook_size_problem",
    "json_depth",
    "num_workers",
]

#: Bounds of the registration parameter: a second (tests, the local mode) to thirty days.
MIN_IDLE_TIMEOUT_S = 1
MAX_IDLE_TIMEOUT_S = 30 * 24 * 3600

#: DynamoDB TransactWriteItems holds at most this many items.
TRANSACTION_MAX_ITEMS = 100
#: Items of the registration transaction besides the rules: job, trial mapping, registry entry, event.
REGISTRATION_FIXED_ITEMS = 4
#: The most rules one job can have: one transaction item per rule.
MAX_RULES_PER_JOB = TRANSACTION_MAX_ITEMS - REGISTRATION_FIXED_ITEMS
#: SageMaker's limit on RuleConfigurationName; also keeps the rule's key far below DynamoDB's.
MAX_RULE_NAME_LENGTH = 256
#: SageMaker's limit on the entries of a RuleParameters map.
MAX_PARAMETERS_PER_RULE = 100
MAX_PARAMETER_KEY_LENGTH = 256
#: Room for an ``action_json`` with several endpoints; 100 such values still fit one item.
MAX_PARAMETER_VALUE_LENGTH = 2048
#: One rule's parameters (names and values): its item stores them twice, far below 400 KB.
MAX_RULE_PARAMETERS_BYTES = 16 * 1024
#: All rules' parameters together: the InProgress event item carries every rule's parameters and the
#: hook configuration, and must stay below DynamoDB's 400 KB item limit (the transaction below 4 MB).
MAX_RULES_PARAMETERS_BYTES = 192 * 1024
#: The hook configuration is stored in the job's item and echoed in every state-change event.
MAX_HOOK_CONFIG_BYTES = 32 * 1024
MAX_COLLECTIONS = 100
#: A ``tornasole_job.json`` larger than this is refused unread.
MAX_JOB_FILE_BYTES = 1024 * 1024
#: Deeper JSON than any configuration needs is refused (the shapes above are 4 levels deep).
MAX_JSON_DEPTH = 16
MAX_WORKERS = 4096
#: SageMaker's training job name pattern.
JOB_NAME_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"

_MAX_LISTED = 20


def json_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """Nesting depth of a parsed JSON value, counted without recursion (stops past ``limit``)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, (Mapping, list, tuple)):
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        children = item.values() if isinstance(item, Mapping) else item
        stack.extend((c, depth + 1) for c in children)
    return deepest


def _bad_characters(text: str) -> list[str]:
    """Control, format (bidi overrides, zero-width) and line/paragraph separator characters."""
    return sorted({f"U+{ord(c):04X}" for c in text if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")})


def num_workers(value: Any) -> int | None:
    """``NumWorkers`` as given (int, integral number or digit string) -> int in 1..MAX_WORKERS, or None."""
    if value is None or value == "":
        return None
    number: Any = value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() and len(value) < 10:
        number = int(value.strip())
    if isinstance(number, float) and math.isfinite(number) and number.is_integer():
        number = int(number)
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_WORKERS:
        raise InvalidJobConfiguration(
            f"NumWorkers={value!r} must be a whole number of workers between 1 and {MAX_WORKERS}"
        )
    return number


def _name_problems(name: str) -> list[str]:
    problems = []
    if len(name) > MAX_RULE_NAME_LENGTH:
        problems.append(
            f"rule name {name[:40]!r}... is {len(name)} characters long; the limit is {MAX_RULE_NAME_LENGTH}"
        )
    bad = _bad_characters(name)
    if bad:
        problems.append(f"rule name {name[:80]!r} contains control or bidi characters ({', '.join(bad)})")
    if name.startswith("@") or "#" in name:
        problems.append(f"rule name {name[:80]!r} may not start with '@' or contain '#'")
    return problems


def _parameters_bytes(rule: RuleConfig) -> int:
    raw = rule.rule_parameters or rule.parameters
    return sum(len(k.encode()) + len(v.encode()) for k, v in raw.items())


def _parameter_problems(rule: RuleConfig) -> list[str]:
    raw = rule.rule_parameters or rule.parameters
    problems = []
    size = _parameters_bytes(rule)
    if size > MAX_RULE_PARAMETERS_BYTES:
        problems.append(
            f"rule {rule.name!r}: its parameters take {size} bytes; the limit is {MAX_RULE_PARAMETERS_BYTES}"
        )
    if len(raw) > MAX_PARAMETERS_PER_RULE:
        problems.append(
            f"rule {rule.name!r} has {len(raw)} parameters; the limit is {MAX_PARAMETERS_PER_RULE}"
        )
    for key, value in raw.items():
        if len(key) > MAX_PARAMETER_KEY_LENGTH or _bad_characters(key):
            problems.append(
                f"rule {rule.name!r}: parameter name {key[:60]!r} is too long or has control characters"
            )
        elif len(value) > MAX_PARAMETER_VALUE_LENGTH:
            problems.append(
                f"rule {rule.name!r}: parameter {key!r} is {len(value)} characters long; "
                f"the limit is {MAX_PARAMETER_VALUE_LENGTH}"
            )
    for path in rule.other_trials:
        if not path.startswith("s3://"):
            problems.append(f"rule {rule.name!r}: other trial {path[:200]!r} is not an s3:// path")
    return problems


def hook_size_problem(hook: Mapping[str, Any]) -> str | None:
    size = len(json.dumps(hook, default=str))
    if size > MAX_HOOK_CONFIG_BYTES:
        return f"DebugHookConfig is {size} bytes of JSON; the limit is {MAX_HOOK_CONFIG_BYTES}"
    return None


def _hook_problems(hook: Mapping[str, Any] | None) -> list[str]:
    if hook is None:
        return []
    if not isinstance(hook, Mapping):
        return [f"DebugHookConfig must be an object, got {type(hook).__name__}"]
    too_big = hook_size_problem(hook)
    if too_big:
        return [too_big]
    problems = []
    colls = hook.get("CollectionConfigurations") or []
    if not isinstance(colls, list):
        return ["DebugHookConfig.CollectionConfigurations must be a list"]
    if len(colls) > MAX_COLLECTIONS:
        problems.append(
            f"DebugHookConfig has {len(colls)} collection configurations; the limit is {MAX_COLLECTIONS}"
        )
    for i, c in enumerate(colls):
        name = c.get("CollectionName") if isinstance(c, Mapping) else None
        if (
            not isinstance(name, str)
            or not name
            or len(name) > MAX_PARAMETER_KEY_LENGTH
            or _bad_characters(name)
        ):
            problems.append(
                f"DebugHookConfig.CollectionConfigurations[{i}] needs a CollectionName: printable text "
                f"of at most {MAX_PARAMETER_KEY_LENGTH} characters"
            )
        else:
            problems += _string_map_problems(
                f"collection {name!r}: CollectionParameters", c.get("CollectionParameters")
            )
            problems += _regex_problems(f"collection {name!r}", c.get("CollectionParameters"))
    problems += _string_map_problems("DebugHookConfig.HookParameters", hook.get("HookParameters"))
    problems += _regex_problems("DebugHookConfig.HookParameters", hook.get("HookParameters"))
    return problems


def _regex_problems(where: str, params: Any) -> list[str]:
    """``include_regex`` (comma-separated, as the hook reads it): each pattern must run in bounded time."""
    if not isinstance(params, Mapping) or not isinstance(params.get("include_regex"), str):
        return []
    patterns = [p.strip() for p in params["include_regex"].split(",") if p.strip()]
    return [
        f"{where}: include_regex {p[:80]!r}: {problem}" for p in patterns if (problem := regex_problem(p))
    ]


def _string_map_problems(where: str, value: Any) -> list[str]:
    """A SageMaker parameter map: text (or number) values of bounded size under bounded keys."""
    if value is None:
        return []
    if not isinstance(value, Mapping):
        return [f"{where} must be an object, got {type(value).__name__}"]
    problems = []
    for key, item in value.items():
        if not isinstance(key, str) or len(key) > MAX_PARAMETER_KEY_LENGTH or _bad_characters(key):
            problems.append(f"{where}: key {str(key)[:60]!r} is too long or has control characters")
        elif not isinstance(item, (str, int, float, bool)) and item is not None:
            problems.append(f"{where}: {key!r} must be a string or a number, got {type(item).__name__}")
        elif len(str(item)) > MAX_PARAMETER_VALUE_LENGTH:
            problems.append(f"{where}: {key!r} is longer than {MAX_PARAMETER_VALUE_LENGTH} characters")
    return problems


def check_job(rules: tuple[RuleConfig, ...], hook_config: Mapping[str, Any] | None, job: str | None) -> None:
    """Raise ``InvalidJobConfiguration`` listing every problem of these rules and hook configuration."""
    problems: list[str] = []
    if not rules:
        problems.append("a job needs at least one rule")
    if len(rules) > MAX_RULES_PER_JOB:
        problems.append(
            f"{len(rules)} rules; a job holds at most {MAX_RULES_PER_JOB} (registration is one "
            f"DynamoDB transaction of {TRANSACTION_MAX_ITEMS} items, {REGISTRATION_FIXED_ITEMS} of them "
            "for the job itself)"
        )
    else:
        configured = configured_destinations()
        for rule in rules:
            shape = _name_problems(rule.name) + _parameter_problems(rule)
            problems += shape or builtin_rule_problems(rule)
            problems += destination_problems(rule.name, rule.actions, configured)
        total = sum(_parameters_bytes(r) for r in rules)
        if total > MAX_RULES_PARAMETERS_BYTES:
            problems.append(
                f"the rules' parameters take {total} bytes together; the limit is "
                f"{MAX_RULES_PARAMETERS_BYTES} (every rule's parameters travel in the job's InProgress event)"
            )
    problems += _hook_problems(hook_config)
    if len(problems) > _MAX_LISTED:
        problems = [*problems[:_MAX_LISTED], f"... and {len(problems) - _MAX_LISTED} more problems"]
    if problems:
        raise InvalidJobConfiguration(problems, job=job)


def check_idle_timeout(value: Any, what: str = "idle_timeout_s") -> float | None:
    """The registration parameter as seconds (None: the default), or a ``TornasoleValueError`` naming it."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TornasoleValueError(f"{what} must be a number of seconds, got {type(value).__name__}")
    try:
        seconds = float(value)
    except ValueError:
        raise TornasoleValueError(f"{what} must be a number of seconds, got {value!r}") from None
    if not math.isfinite(seconds) or not MIN_IDLE_TIMEOUT_S <= seconds <= MAX_IDLE_TIMEOUT_S:
        raise TornasoleValueError(
            f"{what} must be between {MIN_IDLE_TIMEOUT_S} and {MAX_IDLE_TIMEOUT_S} seconds, got {value!r}"
        )
    return seconds

"""Lambda event filtering for the local stream source: the records AWS would never hand to the function.

The stack's stream event source mapping carries a filter
(``StackSpec.stream_filter_pattern``: outbox inserts only), so on AWS
``publish_events`` never sees the evaluator's other writes, nor the outbox
rows' own claim and published updates. The local mode applies the same
pattern before invoking the function; without it every claim would come back
as a record and cost a failed conditional claim (a request) of its own.

Only the part of the filter grammar the stack uses is understood: nested
objects, lists of exact values, and ``{"prefix": ...}``. Any other operator is
refused when the pattern is compiled, never silently treated as a match.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["compile_pattern"]

Matcher = Callable[[Any], bool]


def compile_pattern(pattern: str | dict[str, Any]) -> Matcher:
    """A predicate over one record (a dict in the event's JSON shape) for a Lambda filter pattern."""
    spec = json.loads(pattern) if isinstance(pattern, str) else pattern
    if not isinstance(spec, dict):
        raise ValueError(f"filter pattern must be a JSON object, got {type(spec).__name__}")
    return _object(spec, "")


def _object(spec: dict[str, Any], where: str) -> Matcher:
    fields: list[tuple[str, Matcher]] = []
    for name, sub in spec.items():
        path = f"{where}.{name}" if where else name
        if isinstance(sub, dict):
            fields.append((name, _object(sub, path)))
        elif isinstance(sub, list):
            fields.append((name, _values(sub, path)))
        else:
            raise ValueError(f"filter pattern: {path} must be an object or a list, got {sub!r}")

    def match(value: Any) -> bool:
        return isinstance(value, dict) and all(name in value and m(value[name]) for name, m in fields)

    return match


def _values(options: list[Any], where: str) -> Matcher:
    exact: list[Any] = []
    prefixes: list[str] = []
    for option in options:
        if isinstance(option, dict):
            if set(option) != {"prefix"} or not isinstance(option["prefix"], str):
                raise ValueError(f"filter pattern: {where}: unsupported operator {option!r}")
            prefixes.append(option["prefix"])
        else:
            exact.append(option)

    def match(value: Any) -> bool:
        if isinstance(value, list):  # a list in the record matches if any element does
            return any(match(v) for v in value)
        if value in exact:
            return True
        return isinstance(value, str) and any(value.startswith(p) for p in prefixes)

    return match

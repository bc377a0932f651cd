"""The profiler section of ``tornasole rules list``: SageMaker's profiler rules, their parameters
with defaults, and when each fires (``tornasole.rules.profiler``)."""

from __future__ import annotations

from typing import Any

from tornasole.cli.table import cell_width, format_table

__all__ = ["describe_profiler_rule", "is_profiler_rule", "print_profiler_rule", "print_profiler_rules"]


def is_profiler_rule(name: str) -> bool:
    from tornasole.rules.profiler import PROFILER_RULES

    return name in PROFILER_RULES


def describe_profiler_rule(name: str) -> dict[str, Any]:
    from tornasole.rules.profiler import PROFILER_RULES

    cls = PROFILER_RULES[name]
    return {
        "name": name,
        "kind": "profiler",
        "reads": sorted(cls.KINDS),
        "parameters": [
            {"name": p.name, "kind": p.kind, "default": p.default, "help": p.help} for p in cls.PARAMETERS
        ],
        "fires_when": cls.SUMMARY,
        "likely_cause": cls.CAUSE,
        "suggested_fix": cls.FIX,
    }


def print_profiler_rules() -> None:
    from tornasole.rules.profiler import profiler_rule_names

    rows = []
    for name in profiler_rule_names():
        info = describe_profiler_rule(name)
        params = (
            ", ".join(f"{p['name']}={p['default']}" for p in info["parameters"]) or "<RuleName>_<parameter>"
        )
        rows.append([name, params, info["fires_when"]])
    print("\nprofiler rules (ProfilerRuleConfigurations: evaluated on each profiler file):")
    print(format_table(["rule", "parameters (defaults)", "fires when"], rows, max_width=cell_width(70)))


def print_profiler_rule(name: str) -> None:
    info = describe_profiler_rule(name)
    print(f"{name} (profiler rule; reads {' and '.join(info['reads'])} metrics)")
    print(f"  fires when: {info['fires_when']}")
    for p in info["parameters"]:
        print(f"  {p['name']} ({p['kind']}, default {p['default']}): {p['help']}")
    if name == "ProfilerReport":
        print(
            "  <RuleName>_<parameter>: a parameter of one of the rules it runs, e.g. CPUBottleneck_threshold"
        )
    print(f"  likely cause: {info['likely_cause']}")
    print(f"  suggested fix: {info['suggested_fix']}")

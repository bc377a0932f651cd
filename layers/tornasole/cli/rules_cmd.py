"""``tornasole rules list`` (the built-in catalogue) and ``tornasole invoke`` (offline rule run).

``rules list`` prints a table whose long cells are cut only on an interactive
terminal; ``--name`` prints one rule in full (every parameter, its kind,
default and meaning) and ``--json`` the whole catalogue as data. ``invoke``
shares its trial wait, progress line and ``RESULT`` line with
``python -m tornasole.rules.rule_invoker`` (:mod:`tornasole.cli.invoke_report`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from tornasole.cli.options import non_negative_float, non_negative_int, positive_float
from tornasole.cli.table import cell_width, format_table

__all__ = ["add_parser", "list_parameters", "parse_param", "parse_rule_spec"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("rules", help="the built-in rules")
    rsub = p.add_subparsers(dest="rules_command", metavar="SUBCOMMAND", required=True)
    ls = rsub.add_parser("list", help="every built-in rule with its parameters and defaults")
    ls.add_argument("--name", help="only this rule, in full: every parameter, its default and meaning")
    ls.add_argument("--json", action="store_true", help="the catalogue as JSON (every field in full)")
    ls.set_defaults(func=_list)

    inv = sub.add_parser("invoke", help="run a rule over a trial offline, with a progress bar")
    inv.add_argument("path", help="trial directory or s3://bucket/prefix")
    inv.add_argument(
        "--rule",
        required=True,
        help="NAME[:k=v,...]: a built-in, or the class name with --rule-file; a list parameter takes "
        "comma-separated values (AllZero:collection_names=weights,gradients)",
    )
    inv.add_argument("--rule-file", help="source file of a custom rule (local path or s3://)")
    inv.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="K=V",
        help="rule parameter, the whole value after = (repeatable)",
    )
    inv.add_argument("--other-trials", help="';'-separated paths of other trials")
    inv.add_argument("--start-step", type=non_negative_int, default=0)
    inv.add_argument("--end-step", type=non_negative_int, default=None, help="exclusive")
    inv.add_argument(
        "--timeout",
        type=non_negative_float,
        default=10.0,
        help="seconds to wait for a trial to appear at PATH (default 10)",
    )
    inv.add_argument(
        "--idle-timeout",
        type=positive_float,
        default=1800.0,
        help="live trial: give up when no new step lands for this many seconds (default 1800)",
    )
    inv.set_defaults(func=_invoke)


def list_parameters(rule: str) -> frozenset[str] | None:
    """The list-valued parameters of built-in ``rule`` (``collection_names``), ``None`` if not built-in.

    Why: in ``NAME:k=v,...`` a comma separates parameters, and it also separates a list's items
    (the SageMaker SDK's ``rule_parameters`` are strings, smdebug splits lists on commas); only a
    list parameter may take the items after it.
    """
    from tornasole.rules import get_rule, rule_names

    if rule not in rule_names():
        return None
    return frozenset(p.name for p in getattr(get_rule(rule), "PARAMETERS", ()) if p.kind.endswith("_list"))


def _top_level_items(text: str) -> list[str]:
    """``text`` split on the commas outside ``[...]`` (a JSON list value keeps its commas)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth <= 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [s.strip() for s in items if s.strip()]


def parse_rule_spec(spec: str, *, custom: bool = False) -> tuple[str, dict[str, str]]:
    """``"LossNotDecreasing:num_steps=5,diff_percent=1"`` -> name and string parameters.

    A list parameter takes the comma-separated items after it, as SageMaker's rule parameters
    write lists: ``AllZero:collection_names=weights,gradients,threshold=0`` gives
    ``collection_names="weights,gradients"`` (a JSON list ``=["weights","gradients"]`` works too).
    Any parameter of a custom rule (``custom``; its kinds are unknown here) may do the same.
    """
    name, _, rest = spec.partition(":")
    name = name.strip()
    if not name:
        raise ValueError(f"rule spec {spec!r} has no rule name")
    takes_list = None if custom else list_parameters(name)
    params: dict[str, str] = {}
    last: str | None = None
    for item in _top_level_items(rest):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            last = key.strip()
            params[last] = value.strip()
        elif not sep and last is not None and (takes_list is None or last in takes_list):
            params[last] = f"{params[last]},{item}"
        else:
            lists = (
                f"only a list parameter ({', '.join(sorted(takes_list))}) takes several"
                if takes_list
                else f"{name} has no list parameter to take several"
            )
            raise ValueError(
                f"rule {name!r}: parameter {item!r} is not key=value "
                f"(',' separates parameters; {lists} comma-separated values)"
            )

    return name, params


def parse_param(rule: str, item: str) -> tuple[str, str]:
    """One ``--param K=V``: the whole value, commas included (``collection_names=weights,gradients``)."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"rule {rule!r}: parameter {item!r} is not key=value")
    return key.strip(), value.strip()


def _describe_rule(name: str) -> dict[str, Any]:
    from tornasole.rules import get_rule
    from tornasole.rules.registry import resolve_alias

    cls = get_rule(name)
    target, presets = resolve_alias(name)  # an alias: its rule, its presets shown as the defaults
    doc = (cls.__doc__ or "").strip()
    fires_when = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    if target != name:
        fires_when = f"{target} with {', '.join(f'{k}={v}' for k, v in presets.items())}: {fires_when}"
    return {
        "name": name,
        "fires_when": fires_when,
        "parameters": [
            {
                "name": p.name,
                "kind": p.kind,
                "default": presets.get(p.name, p.default),
                "required": p.required,
                "help": p.help,
            }
            for p in getattr(cls, "PARAMETERS", ())
        ],
    }


def _print_rule(info: dict[str, Any]) -> None:
    print(info["name"])
    print(f"  fires when: {info['fires_when'] or '-'}")
    print("  parameters:" if info["parameters"] else "  parameters: none")
    for p in info["parameters"]:
        default = "required" if p["required"] else f"default {p['default']}"
        print(f"    {p['name']} ({p['kind']}, {default}){': ' + p['help'] if p['help'] else ''}")


def _list(args: argparse.Namespace) -> int:
    from tornasole.cli import profiler_rules_list
    from tornasole.cli.invoke_report import check_builtin_rule
    from tornasole.rules import rule_names

    if args.name and profiler_rules_list.is_profiler_rule(args.name):
        if args.json:
            print(json.dumps(profiler_rules_list.describe_profiler_rule(args.name), indent=2))
        else:
            profiler_rules_list.print_profiler_rule(args.name)
        return 0
    if args.name:
        check_builtin_rule(args.name)
    names = [args.name] if args.name else rule_names()
    infos = [_describe_rule(n) for n in names]
    if args.json:
        print(json.dumps(infos if not args.name else infos[0], indent=2))
        return 0
    if args.name:
        _print_rule(infos[0])
        return 0
    rows = [
        [
            i["name"],
            ", ".join(f"{p['name']}={p['default']}" for p in i["parameters"]) or "-",
            i["fires_when"].split(". ")[0],
        ]
        for i in infos
    ]
    print(format_table(["rule", "parameters (defaults)", "fires when"], rows, max_width=cell_width(70)))
    profiler_rules_list.print_profiler_rules()
    return 0


def _load_custom_rule(path: str, name: str, trial: Any, others: list, params: dict[str, str]) -> Any:
    """The ``--rule-file`` rule; a file that is not there is "not found" (exit 3), as in ``jobs register``."""
    from tornasole.cli.errors import NotFoundError
    from tornasole.exceptions import RuleLoadError
    from tornasole.rules.loader import load_rule

    try:
        return load_rule(path, name, trial, other_trials=others or None, params=params)
    except RuleLoadError as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            raise NotFoundError(f"--rule-file {path}: rule file not found") from exc
        raise


def _invoke(args: argparse.Namespace) -> int:
    from tornasole.cli.invoke_report import check_builtin_rule, print_verdict, run_rule, wait_for_trial
    from tornasole.rules import create_rule

    name, params = parse_rule_spec(args.rule, custom=bool(args.rule_file))
    params.update(parse_param(name, item) for item in args.param)
    if not args.rule_file:
        check_builtin_rule(name)
    trial = wait_for_trial(args.path, args.timeout)
    others = [wait_for_trial(p, args.timeout) for p in (args.other_trials or "").split(";") if p.strip()]
    if args.rule_file:
        rule = _load_custom_rule(args.rule_file, name, trial, others, params)
    else:
        rule = create_rule(name, trial, other_trials=others or None, **params)
    summary = run_rule(
        rule, start_step=args.start_step, end_step=args.end_step, idle_timeout=args.idle_timeout
    )
    return print_verdict(summary)

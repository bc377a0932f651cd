"""``tornasole rules list`` (the built-in catalogue) and ``tornasole invoke`` (offline rule run).

``rules list`` prints a table whose long cells are cut only on an interactive
terminal; ``--name`` prints one rule in full (every parameter, its kind,
default and meaning) and ``--json`` the whole catalogue as data. ``invoke``
shares its trial wait, progress line and ``RESULT`` line with
``python -m tornasole.rules.rule_invoker`` (:mod:`tornasole.rules.run_report`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from tornasole.cli.table import cell_width, format_table

__all__ = ["add_parser", "parse_rule_spec"]


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
        "--rule", required=True, help="NAME[:k=v,...]: a built-in, or the class name with --rule-file"
    )
    inv.add_argument("--rule-file", help="source file of a custom rule (local path or s3://)")
    inv.add_argument(
        "--param", action="append", default=[], metavar="K=V", help="rule parameter (repeatable)"
    )
    inv.add_argument("--other-trials", help="';'-separated paths of other trials")
    inv.add_argument("--start-step", type=int, default=0)
    inv.add_argument("--end-step", type=int, default=None, help="exclusive")
    inv.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="seconds to wait for a trial to appear at PATH (default 10)",
    )
    inv.add_argument(
        "--idle-timeout",
        type=float,
        default=1800.0,
        help="live trial: give up when no new step lands for this many seconds (default 1800)",
    )
    inv.set_defaults(func=_invoke)


def parse_rule_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``"LossNotDecreasing:num_steps=5,diff_percent=1"`` -> name and string parameters."""
    name, _, rest = spec.partition(":")
    params: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"rule {name!r}: parameter {item!r} is not key=value")
        params[key.strip()] = value.strip()
    if not name.strip():
        raise ValueError(f"rule spec {spec!r} has no rule name")
    return name.strip(), params


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
    from tornasole.rules import rule_names
    from tornasole.rules.run_report import check_builtin_rule

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
    return 0


def _invoke(args: argparse.Namespace) -> int:
    from tornasole.rules import create_rule
    from tornasole.rules.run_report import check_builtin_rule, print_verdict, run_rule, wait_for_trial

    name, params = parse_rule_spec(args.rule)
    for item in args.param:
        params.update(parse_rule_spec(f"{name}:{item}")[1])
    if not args.rule_file:
        check_builtin_rule(name)
    trial = wait_for_trial(args.path, args.timeout)
    others = [wait_for_trial(p, args.timeout) for p in (args.other_trials or "").split(";") if p.strip()]
    if args.rule_file:
        from tornasole.rules.loader import load_rule

        rule = load_rule(args.rule_file, name, trial, other_trials=others or None, params=params)
    else:
        rule = create_rule(name, trial, other_trials=others or None, **params)
    summary = run_rule(
        rule, start_step=args.start_step, end_step=args.end_step, idle_timeout=args.idle_timeout
    )
    return print_verdict(summary)

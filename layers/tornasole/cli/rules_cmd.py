"""``tornasole rules list`` (the built-in catalogue) and ``tornasole invoke`` (offline rule run)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tornasole.cli.table import format_table

__all__ = ["add_parser", "parse_rule_spec"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("rules", help="the built-in rules")
    rsub = p.add_subparsers(dest="rules_command", metavar="SUBCOMMAND", required=True)
    ls = rsub.add_parser("list", help="every built-in rule with its parameters and defaults")
    ls.add_argument("--name", help="only this rule")
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


def _list(args: argparse.Namespace) -> int:
    from tornasole.rules import get_rule, rule_names

    names = [args.name] if args.name else rule_names()
    rows = []
    for name in names:
        cls = get_rule(name)
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        params = ", ".join(f"{p.name}={p.default}" for p in getattr(cls, "PARAMETERS", ())) or "-"
        rows.append([name, params, doc])
    print(format_table(["rule", "parameters (defaults)", "fires when"], rows, max_width=70))
    return 0


def _progress(done: int, total: int, fired: int, width: int = 30) -> None:
    filled = int(width * done / total) if total else width
    bar = "#" * filled + "." * (width - filled)
    sys.stderr.write(f"\r[{bar}] {done}/{total} steps, fired at {fired}")
    sys.stderr.flush()


def _invoke(args: argparse.Namespace) -> int:
    from tornasole.cli.trial_cmd import open_trial
    from tornasole.rules import create_rule, invoke_rule

    name, params = parse_rule_spec(args.rule)
    for item in args.param:
        params.update(parse_rule_spec(f"{name}:{item}")[1])
    trial = open_trial(args.path)
    others = [open_trial(p) for p in (args.other_trials or "").split(";") if p.strip()]
    if args.rule_file:
        from tornasole.rules.loader import load_rule

        rule = load_rule(args.rule_file, name, trial, other_trials=others or None, params=params)
    else:
        rule = create_rule(name, trial, other_trials=others or None, **params)
    steps = [
        s for s in trial.steps() if s >= args.start_step and (args.end_step is None or s < args.end_step)
    ]
    fired: list[Any] = []
    for i, step in enumerate(steps):
        summary = invoke_rule(rule, start_step=step, end_step=step + 1)
        fired += summary.fired
        _progress(i + 1, len(steps), len(fired))
    sys.stderr.write("\n")
    for outcome in fired:
        print(outcome.details)
    status = "IssuesFound" if fired else "NoIssuesFound"
    first = fired[0].step if fired else "-"
    print(f"RESULT rule={name} status={status} first_step={first} steps_evaluated={len(steps)}")
    return 1 if fired else 0

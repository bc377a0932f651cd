"""``tornasole trial summary PATH``: what a trial holds (steps, modes, workers, collections, tensors)."""

from __future__ import annotations

import argparse
from typing import Any

from tornasole.cli.options import non_negative_float, positive_int
from tornasole.cli.table import format_table

__all__ = ["add_parser", "add_timeout_option", "open_trial", "summarize"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("trial", help="inspect a trial (local path or s3://)")
    tsub = p.add_subparsers(dest="trial_command", metavar="SUBCOMMAND", required=True)
    s = tsub.add_parser("summary", help="steps, modes, workers, collections and tensors of a trial")
    s.add_argument("path", help="trial directory or s3://bucket/prefix")
    add_timeout_option(s)
    s.add_argument(
        "--tensors", type=positive_int, default=50, help="list at most this many tensors (default 50)"
    )
    s.set_defaults(func=_summary)


def add_timeout_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout",
        type=non_negative_float,
        default=0.0,
        help="seconds to wait for a trial to appear at PATH (default 0: it must be there)",
    )


def open_trial(path: str, timeout: float = 0.0) -> Any:
    """Open a trial for a command: at most ``timeout`` s of waiting, a clear error for an empty path."""
    from tornasole.cli.invoke_report import wait_for_trial

    return wait_for_trial(path, timeout)


def summarize(trial: Any) -> dict[str, Any]:
    """A plain-data summary of a trial (used by the command and by tests)."""
    steps = trial.steps()
    modes = {m.name: len(trial.steps(mode=m)) for m in trial.modes()} if steps else {}
    return {
        "path": trial.path,
        "steps": len(steps),
        "first_step": steps[0] if steps else None,
        "last_step": steps[-1] if steps else None,
        "modes": modes,
        "workers": sorted(trial.workers()),
        "training_ended": trial.training_ended(),
        "collections": {name: len(c.tensor_names) for name, c in sorted(trial.collections().items())},
        "tensors": {name: len(trial.tensor(name).steps()) for name in sorted(trial.tensor_names())},
    }


def _summary(args: argparse.Namespace) -> int:
    trial = open_trial(args.path, args.timeout)
    info = summarize(trial)
    print(f"trial      {info['path']}")
    if info["steps"]:
        print(f"steps      {info['steps']} (global {info['first_step']} .. {info['last_step']})")
    else:
        print("steps      none yet")
    print("modes      " + (", ".join(f"{m}: {n}" for m, n in info["modes"].items()) or "-"))
    print(f"workers    {', '.join(info['workers']) or '-'}")
    print(f"ended      {'yes (end marker present)' if info['training_ended'] else 'no (live)'}")
    print("\ncollections")
    print(format_table(["name", "tensors"], [[k, v] for k, v in info["collections"].items()]))
    names = list(info["tensors"].items())
    print(f"\ntensors ({len(names)})")
    print(format_table(["name", "steps"], [[k, v] for k, v in names[: args.tensors]]))
    if len(names) > args.tensors:
        print(f"... {len(names) - args.tensors} more (use --tensors N)")
    return 0

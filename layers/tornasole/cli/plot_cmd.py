"""``tornasole plot PATH``: tensor values or reductions over steps, firing steps marked.

A tensor with one element is plotted as its value; a larger one as a
reduction (``--reduction``, default ``mean``, ``--abs`` for the absolute
value's). With ``--job`` the steps where that job's rules fired are marked,
so a person sees at a glance where the run went wrong.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from tornasole.analysis.plot import plot_trial, series
from tornasole.cli.errors import NotFoundError, did_you_mean
from tornasole.cli.trial_cmd import add_timeout_option
from tornasole.modes import ModeKeys

__all__ = ["add_parser", "plot_trial", "series"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("plot", help="plot tensors over steps to a PNG")
    p.add_argument("path", help="trial directory or s3://bucket/prefix")
    add_timeout_option(p)
    p.add_argument("--tensor", action="append", default=[], help="tensor name (repeatable)")
    p.add_argument(
        "--collection", action="append", default=[], help="every tensor of a collection (repeatable)"
    )
    p.add_argument("--regex", action="append", default=[], help="tensors matching a regex (repeatable)")
    p.add_argument("--reduction", default="mean", help="reduction for non-scalar tensors (default mean)")
    p.add_argument("--abs", action="store_true", help="reduce absolute values")
    p.add_argument("--mode", choices=[m.name for m in ModeKeys], help="only steps of this mode")
    p.add_argument("--job", help="mark the steps where this job's rules fired")
    p.add_argument("--log-y", action="store_true", help="logarithmic y axis")
    p.add_argument(
        "-o", "--output", default="tornasole.png", help="PNG file to write (default tornasole.png)"
    )
    p.set_defaults(func=_plot)


def _plot(args: argparse.Namespace) -> int:
    from tornasole.cli.trial_cmd import open_trial

    for pattern in args.regex:  # before opening the trial: a typo is reported at once, as a usage error
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"--regex {pattern!r} is not a valid regular expression: {exc}") from None
    trial = open_trial(args.path, args.timeout)
    names: list[str] = list(args.tensor)
    for c in args.collection:
        names += sorted(trial.tensor_names(collection=c))
    for r in args.regex:
        names += sorted(trial.tensor_names(regex=r))
    if not names:
        raise ValueError("name what to plot: --tensor NAME, --collection NAME or --regex PATTERN")
    names = list(dict.fromkeys(names))
    known = trial.tensor_names()
    for name in names:
        if name not in known:
            hint = did_you_mean(name, known)
            raise NotFoundError(
                f"trial {trial.name}: no tensor {name!r}{hint} (tornasole trial summary lists them)"
            )
    fired = None
    if args.job:
        from tornasole.jobs.listing import fired_steps

        fired = fired_steps(args.job)
    mode = ModeKeys[args.mode] if args.mode else None
    n = plot_trial(
        trial,
        names,
        args.output,
        reduction=args.reduction,
        abs_=args.abs,
        mode=mode,
        fired=fired,
        log_y=args.log_y,
    )
    print(f"wrote {args.output} ({n} tensor{'s' if n != 1 else ''})")
    return 0

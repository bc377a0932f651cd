"""``tornasole demo``: the whole pipeline on one machine in under two minutes (see ``tornasole.demo``)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo", help="train a healthy and a broken model and watch the rules catch the broken one"
    )
    p.add_argument("--output-dir", default="demo-output", help="where the plot goes (default demo-output)")
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from tornasole.extras import require

    require("demo", "tornasole demo")  # before any work: one line naming the extra, not a late ImportError
    from tornasole.demo.run import run_demo

    result = run_demo(args.output_dir, out=lambda s: print(s, flush=True))
    return 0 if result.ok else 1

"""What each rule configuration of a set adds on the families benchmark: the catches lost and the alarms
cleared if it alone were left out ("drop one"), from the runs ``score.py --json`` wrote.

Usage::

    python bench/detection/families/ablation.py out.json [held.json ...] [--set recommended] [--runs]

Why: a rule is worth its place in the recommended set when some broken run is caught by it alone; a rule
whose every catch another rule also makes, and that alarms on healthy runs, only adds noise. The numbers
follow the scorer's own counting (:mod:`families.counting`), per family:

* ``alone catches``: built-broken runs whose only configuration quiet on the healthy twin is this one (the
  twin-quiet recall would lose them), and ``alone harmful`` those of them whose fault did harm;
* ``alarms``: built-healthy runs (collapsed ones apart) this configuration fires on, and ``alone alarms``
  those where it is the only one firing (leaving it out would clear the alarm).

A configuration's catches that another configuration also makes are not counted as lost, whatever their
latencies: the table says what run-level recall depends on, not when the catch comes. Several files merge in
order, a later file's family replacing an earlier one's (as ``targets_table.py`` merges them). Reads JSON
only: imports neither PyTorch nor scikit-learn.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

if __name__ == "__main__":  # run as a script: ``families`` is imported from bench/detection
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from families.counting import (  # noqa: E402
    collapsed,
    firing_configurations,
    harmful,
    twin_quiet_configurations,
)

__all__ = ["COLUMNS", "contributions", "load_runs"]

#: the table's columns, each a list of runs per configuration (:func:`contributions`)
COLUMNS = ("alone_catches", "alone_harmful", "alarms", "alone_alarms")


def load_runs(paths: list[Path]) -> list[dict]:
    """The runs of each of ``paths`` (``score.py --json`` files), a later file's family replacing an earlier
    file's. Raises ValueError naming the file that holds no runs."""
    by_family: dict[str, list[dict]] = {}
    for path in paths:
        try:
            runs = json.loads(path.read_text())["runs"]
            families = defaultdict(list)
            for r in runs:
                families[r["family"]].append(r)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a score.py --json file with runs ({e!r})") from None
        by_family.update(families)
    return [r for runs in by_family.values() for r in runs]


def _name(r: dict) -> str:
    return f"{r['case']}-s{r['seed']}"


def contributions(runs: list[dict], set_name: str) -> dict[str, dict]:
    """Per configuration of ``set_name`` that fired anywhere: ``alone_catches``, ``alone_harmful``,
    ``alarms`` and ``alone_alarms`` (lists of ``case-sSEED``; the module docstring says what each counts).

    >>> runs = [
    ...     {"case": "f/healthy", "family": "f", "seed": 0, "kind": "healthy", "final_val_acc": 0.9,
    ...      "firings": {"s": {"A": {"first_step": 3}, "B": {"first_step": None}}}},
    ...     {"case": "f/bug", "family": "f", "seed": 0, "kind": "broken", "final_val_acc": 0.1,
    ...      "firings": {"s": {"A": {"first_step": 1}, "B": {"first_step": 2}}}},
    ... ]
    >>> c = contributions(runs, "s")
    >>> c["A"]["alone_alarms"], c["B"]["alone_catches"], c["B"]["alone_harmful"], c["A"]["alone_catches"]
    (['f/healthy-s0'], ['f/bug-s0'], ['f/bug-s0'], [])
    """
    by_family: dict[str, list[dict]] = defaultdict(list)
    for r in runs:
        by_family[r["family"]].append(r)
    out: dict[str, dict] = defaultdict(lambda: {k: [] for k in COLUMNS})
    for family_runs in by_family.values():
        for r in family_runs:
            fired = firing_configurations(r, set_name)
            for conf in fired:
                out[conf]  # every configuration that fired has a row, even with nothing to its name
            if r["kind"] == "healthy" and not collapsed(r):
                for conf in fired:
                    out[conf]["alarms"].append(_name(r))
                if len(fired) == 1:
                    out[next(iter(fired))]["alone_alarms"].append(_name(r))
            elif r["kind"] == "broken":
                quiet = twin_quiet_configurations(r, family_runs, set_name)
                if len(quiet) == 1:
                    conf = next(iter(quiet))
                    out[conf]["alone_catches"].append(_name(r))
                    if harmful(r, family_runs):
                        out[conf]["alone_harmful"].append(_name(r))
    return dict(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+", type=Path, help="score.py --json files, merged in order")
    ap.add_argument("--set", default="recommended", help="the rule set (default: recommended)")
    ap.add_argument("--runs", action="store_true", help="also list the runs behind each number")
    args = ap.parse_args(argv)
    try:
        runs = load_runs(args.json)
    except ValueError as e:
        print(f"ablation.py: {e}", file=sys.stderr)
        return 2
    without = [r for r in runs if args.set not in r.get("firings", {})]
    if not runs or without:
        what = f"run {_name(without[0])} has" if without else "the files hold"
        print(f"ablation.py: {what} no firings of the set {args.set!r}", file=sys.stderr)
        return 2
    table = contributions(runs, args.set)
    print("| configuration | alone catches | alone harmful | alarms | alone alarms |\n|---|---|---|---|---|")
    order = sorted(table.items(), key=lambda kv: (-len(kv[1]["alone_alarms"]), -len(kv[1]["alarms"]), kv[0]))
    for conf, c in order:
        counts = " | ".join(str(len(c[k])) for k in COLUMNS)
        print(f"| {conf} | {counts} |")
    if args.runs:
        for conf, c in order:
            for key in COLUMNS:
                if c[key]:
                    print(f"{conf} {key}: {', '.join(sorted(c[key]))}")
    print(f"\n{len(runs)} runs, {len({r['family'] for r in runs})} families")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""One rule on saved benchmark trials, under two parameter settings: where its first firing moves.

Usage::

    python bench/detection/rule_scan.py --runs DIR/runs.json [--runs DIR2/runs.json ...] --rule NAME
        [--param name=value ...] [--baseline name=value ...] [--processes N] [--json out.json]

``--runs``: the ``runs.json`` a ``families/score.py --out DIR`` or ``run.py --out DIR`` run left (every
run's path, case, seed, kind and labels). ``--rule``: a configuration of the recommended set
(``UnchangedWeights``, ``LossNotDecreasing``: with its recommended parameters), else any built-in rule or
alias (:func:`tornasole.rules.registry.resolve_alias`) with its defaults. ``--param`` overrides the
parameters of the rule judged ("after"); ``--baseline`` the same rule's parameters for the comparison
("before"; e.g. a new option set to its off value). Prints how many built-healthy and built-broken runs
each setting fires on, every run whose first firing differs between the two (case, seed, kind, labels,
both steps), and, per family or split, the built-healthy runs still firing. ``--json``: every run's two
first firings and their details.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import Counter
from multiprocessing import get_context
from pathlib import Path


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"{flag}: {item!r} is not name=value")
        out[key.strip()] = value.strip()
    return out


def rule_and_params(name: str) -> tuple[str, dict[str, str]]:
    """``(rule to invoke, parameters)`` of a recommended configuration, an alias or a built-in rule."""
    from tornasole.rules.builtin.recommended import RECOMMENDED
    from tornasole.rules.registry import get_rule, resolve_alias

    for conf, rule, params in RECOMMENDED:
        if conf == name:
            return rule, dict(params)
    rule, params = resolve_alias(name)
    get_rule(rule)  # an unknown name fails here, naming it
    return rule, dict(params)


def first_firing(rule: str, params: dict[str, str], path: str) -> dict:
    from tornasole.rules import create_rule, invoke_rule
    from tornasole.trials import create_trial

    trial = create_trial(path, collections_timeout=5.0, poll_interval=0.05)
    fired = invoke_rule(create_rule(rule, trial, **params)).fired
    first = fired[0] if fired else None
    return {
        "step": None if first is None else first.step,
        "details": None if first is None else first.details,
    }


def _judge(job: tuple[dict, str, dict, dict | None]) -> dict:
    logging.disable(logging.WARNING)
    meta, rule, after, before = job
    out = {k: meta.get(k) for k in ("case", "seed", "kind", "split", "labels", "path")}
    out["after"] = first_firing(rule, after, meta["path"])
    out["before"] = first_firing(rule, before, meta["path"]) if before is not None else None
    return out


def load_runs(files: list[str]) -> list[dict]:
    runs = []
    for f in files:
        path = Path(f)
        if not path.is_file():
            raise SystemExit(f"--runs: {f} does not exist (a score.py/run.py --out folder's runs.json)")
        runs += json.loads(path.read_text())
    return runs


def report(results: list[dict], baseline: bool) -> None:
    def built_healthy(r: dict) -> bool:
        return r["kind"] == "healthy"

    settings = ["before", "after"] if baseline else ["after"]
    for setting in settings:
        fired = Counter(
            "healthy" if built_healthy(r) else "broken" for r in results if r[setting]["step"] is not None
        )
        totals = Counter("healthy" if built_healthy(r) else "broken" for r in results)
        print(
            f"{setting}: fires on built-healthy {fired['healthy']}/{totals['healthy']}, "
            f"built-broken {fired['broken']}/{totals['broken']}"
        )
    if baseline:
        changed = [r for r in results if r["before"]["step"] != r["after"]["step"]]
        print(f"\nfirst firing differs on {len(changed)} runs (before -> after):")
        for r in sorted(changed, key=lambda r: (r["kind"] != "healthy", r["case"], r["seed"])):
            print(
                f"  {r['case']} s{r['seed']} ({'built healthy' if built_healthy(r) else 'built broken'}, "
                f"labels {sorted(r['labels'] or {})}): {r['before']['step']} -> {r['after']['step']}"
            )
    still = [r for r in results if built_healthy(r) and r["after"]["step"] is not None]
    print(f"\nbuilt-healthy runs firing after: {len(still)}")
    for r in still:
        print(f"  {r['case']} s{r['seed']} at {r['after']['step']}: {r['after']['details']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", action="append", required=True, help="a runs.json (repeatable)")
    ap.add_argument("--rule", required=True, help="a recommended configuration, alias or built-in rule")
    ap.add_argument("--param", action="append", default=[], help="name=value for the rule judged")
    ap.add_argument("--baseline", action="append", default=None, help="name=value for the comparison")
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--json", help="write every run's first firings here")
    args = ap.parse_args(argv)
    rule, params = rule_and_params(args.rule)
    after = {**params, **_pairs(args.param, "--param")}
    before = {**params, **_pairs(args.baseline, "--baseline")} if args.baseline is not None else None
    runs = load_runs(args.runs)
    print(f"{args.rule} = {rule} {after}" + (f"\nbaseline: {before}" if before is not None else ""))
    jobs = [(r, rule, after, before) for r in runs]
    if args.processes > 1:
        with get_context("fork").Pool(args.processes) as pool:
            results = pool.map(_judge, jobs, chunksize=1)
    else:
        results = [_judge(j) for j in jobs]
    print(f"{len(results)} runs")
    report(results, before is not None)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

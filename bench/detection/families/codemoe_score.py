"""Score the LLM rule sets once on the held-out code mixture-of-experts family (:mod:`families.codemoe`).

Usage::

    python bench/detection/families/codemoe_score.py --seeds 0,1 --out DIR --json out.json
    python bench/detection/families/codemoe_score.py --reuse out.json --json again.json   # rules only

Trains every case of :data:`families.codemoe.CODEMOE_CASES` for each seed (one process, one thread), then
runs ``llm`` (the nine LLM rules at their defaults) and ``recommended`` through ``lm_score``'s
``evaluate_one``; prints ``lm_score.report``'s tables (recall against the labels, false alarms on runs no
label flags, latency, per rule), then recall on the runs built broken and alarms on the runs built healthy,
the harmful runs caught, every alarm on a built-healthy run with its message, every missed built-broken run
with its final validation loss. ``harmful`` (fixed before scoring): :func:`families.codemoe.harmful`
against the worst built-healthy final validation loss of the same seed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)

from families.codemoe import CODEMOE_CASES, harmful  # noqa: E402
from families.codemoe import run as train_codemoe  # noqa: E402
from families.lm_score import LLM_RULES, evaluate_one, family_metrics, report, rule_sets  # noqa: E402


def train_one(name: str, seed: int, root: str) -> dict:
    kind, spec, why = CODEMOE_CASES[name]
    path = os.path.join(root, f"{name}-s{seed}")
    shutil.rmtree(path, ignore_errors=True)
    r = train_codemoe(spec, seed, path)
    out = {"case": name, "family": "codemoe", "seed": seed, "kind": kind, "path": path, "why": why}
    out.update(asdict(r))
    out["final_loss"] = r.final_train_loss
    return out


def _first(r: dict, set_name: str) -> tuple[int, str, str] | None:
    fires = sorted(
        (f["first_step"], c, str(f["details"]))
        for c, f in r["firings"][set_name].items()
        if f["first_step"] is not None
    )
    return fires[0] if fires else None


def built(results: list[dict], set_name: str) -> dict:
    """Recall on runs built broken, alarms on runs built healthy, harmful runs caught, latency, per rule."""
    broken = [r for r in results if r["kind"] == "broken"]
    healthy = [r for r in results if r["kind"] == "healthy"]
    harm = [r for r in results if r["harmful"]]
    latencies = [f[0] - r["onset"] for r in results if r["labels"] and (f := _first(r, set_name))]
    per_rule: dict[str, dict] = {}
    for r in results:
        for conf, f in r["firings"][set_name].items():
            row = per_rule.setdefault(conf, {"runs": 0, "built_healthy": []})
            if f["first_step"] is not None:
                row["runs"] += 1
                if r["kind"] == "healthy":
                    row["built_healthy"].append(f"{r['case']}-s{r['seed']}")
    return {
        "built_broken": len(broken),
        "built_broken_caught": sum(1 for r in broken if _first(r, set_name)),
        "built_healthy": len(healthy),
        "built_healthy_alarmed": sum(1 for r in healthy if _first(r, set_name)),
        "harmful": len(harm),
        "harmful_caught": sum(1 for r in harm if _first(r, set_name)),
        "harmful_missed": sorted(f"{r['case']}-s{r['seed']}" for r in harm if not _first(r, set_name)),
        "median_first_firing_minus_onset": statistics.median(latencies) if latencies else None,
        "per_rule": per_rule,
    }


def print_built(results: list[dict], set_name: str, m: dict) -> None:
    print(f"\n=== {set_name}: by construction ===")
    print(
        f"built broken caught {m['built_broken_caught']}/{m['built_broken']}; built healthy alarmed "
        f"{m['built_healthy_alarmed']}/{m['built_healthy']}; harmful caught {m['harmful_caught']}/"
        f"{m['harmful']}; median first firing - onset {m['median_first_firing_minus_onset']}"
    )
    if m["harmful_missed"]:
        print(f"  harmful missed: {', '.join(m['harmful_missed'])}")
    print("  per rule: runs fired on / built-healthy runs fired on")
    for conf, row in sorted(m["per_rule"].items()):
        if row["runs"]:
            print(
                f"    {conf:32s} {row['runs']:3d}  healthy {len(row['built_healthy'])} {row['built_healthy']}"
            )
    print("  alarms on built-healthy runs (every firing rule, first step, message):")
    for r in results:
        if r["kind"] != "healthy":
            continue
        for conf, f in sorted(r["firings"][set_name].items()):
            if f["first_step"] is not None:
                print(f"    {r['case']}-s{r['seed']} {conf} at {f['first_step']}: {f['details']}")
    print("  missed built-broken runs (labels, final validation loss, harmful):")
    for r in results:
        if r["kind"] == "broken" and not _first(r, set_name):
            print(
                f"    {r['case']}-s{r['seed']} labels {r['labels']} val {r['final_val_loss']:.3f} "
                f"harmful {r['harmful']}"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--cases", default="", help="only the cases whose name matches this regex")
    ap.add_argument("--out", help="keep the trials here (default: a temporary folder, removed)")
    ap.add_argument("--json", help="write the numbers and every run here")
    ap.add_argument("--reuse", help="a --json output whose trials --out kept: score them again (no training)")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    root = args.out or tempfile.mkdtemp(prefix="tornasole-codemoe-")
    os.makedirs(root, exist_ok=True)
    start = time.perf_counter()
    runs = []
    if args.reuse:
        runs = [
            {k: v for k, v in r.items() if k != "firings"}
            for r in json.loads(Path(args.reuse).read_text())["runs"]
            if r["seed"] in seeds and re.search(args.cases, r["case"])
        ]
        missing = [r["path"] for r in runs if not os.path.isdir(r["path"])]
        if missing:
            raise SystemExit(f"--reuse {args.reuse}: {len(missing)} trial folder(s) gone, e.g. {missing[0]}")
    for seed in seeds if not args.reuse else ():
        for name in CODEMOE_CASES:
            if re.search(args.cases, name):
                runs.append(train_one(name, seed, root))
                r = runs[-1]
                print(
                    f"trained {name}-s{seed} ({r['kind']}): labels {r['labels']} train "
                    f"{r['final_train_loss']:.3f} val {r['final_val_loss']:.3f} skipped {r['skipped_steps']} "
                    f"{r['seconds']:.0f} s",
                    flush=True,
                )
    for r in runs:
        worst = max(
            (x["final_val_loss"] for x in runs if x["seed"] == r["seed"] and x["kind"] == "healthy"),
            default=float("inf"),
        )
        r["worst_healthy_val"] = worst
        r["harmful"] = harmful(r["final_val_loss"], worst)
    trained = time.perf_counter()
    sets = {"llm": LLM_RULES, "recommended": rule_sets()["recommended"]}
    results = [evaluate_one((r, sets)) for r in runs]
    evaluated = time.perf_counter()
    numbers = report(results, list(sets))
    for set_name in sets:
        numbers[set_name]["labels"] = family_metrics(results, set_name)
        numbers[set_name]["built"] = built(results, set_name)
        print_built(results, set_name, numbers[set_name]["built"])
    print(
        f"\n{len(runs)} runs; training {trained - start:.0f} s, rules {evaluated - trained:.0f} s "
        f"(1 process); corpus sha256 {runs[0]['corpus_sha256'] if runs else '-'}, Python "
        f"{runs[0]['python'] if runs else '-'}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"numbers": numbers, "runs": results}, indent=1, default=str))
    if not args.out:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

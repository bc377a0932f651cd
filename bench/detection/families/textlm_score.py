"""Score the LLM rules and the recommended rules once on the held-out character-level text LM family
(:mod:`families.textlm`, issue 29).

Usage::

    python bench/detection/families/textlm_score.py --seeds 0,1 --out DIR --json out.json
    python bench/detection/families/textlm_score.py --reuse DIR/runs.json --json out.json   # rules only

Trains every case of :mod:`families.textlm` for each seed, one process, one thread (the trials and a
``runs.json`` of the runs' records are kept in ``--out``), marks each run ``harmful``
(:func:`families.textlm.mark_harmful`), then runs two rule sets on every trial: ``llm`` (``lm_score``'s nine
rules at their defaults) and ``recommended``. Printed: ``lm_score.report`` (recall against the labels, false
alarms on runs no label flags, median first firing minus onset, per rule), then recall on the runs built
broken and alarms on the runs built healthy, the harmful runs caught, every alarm on a healthy run with its
message, and every missed broken run with its final validation loss.
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
from pathlib import Path
from typing import Any

sys.path[0] = str(Path(__file__).resolve().parent.parent)

from run import evaluate_one, rule_sets  # noqa: E402

from families import textlm  # noqa: E402
from families.lm_score import LLM_RULES, _first, report  # noqa: E402

FAMILY = "textlm"


def trained_record(family: Any, family_name: str, name: str, seed: int, root: str) -> tuple[dict, Any]:
    """Train case ``name`` of ``family`` (a module with ``CASES`` and ``run``; textlm's or moetext's) into
    ``root``; ``(its runs.json record, the family's result)``."""
    kind, spec, why = family.CASES[name]
    path = os.path.join(root, f"{name}-s{seed}")
    shutil.rmtree(path, ignore_errors=True)
    r = family.run(spec, seed, path)
    rec = {
        "case": name,
        "family": family_name,
        "seed": seed,
        "kind": kind,
        "why": why,
        "path": path,
        "labels": r.labels,
        "onset": r.onset,
        "final_loss": r.final_train_loss,
        "final_train_loss": r.final_train_loss,
        "val_loss": r.val_loss,
        "non_finite": r.non_finite,
        "seconds": r.seconds,
        **r.record,
    }
    return rec, r


def train_one(name: str, seed: int, root: str) -> dict:
    rec, r = trained_record(textlm, FAMILY, name, seed, root)
    print(
        f"  {name}-s{seed}: {r.seconds:.0f} s, train {r.final_train_loss:.3f}, val {r.val_loss:.3f}, "
        f"non-finite {r.non_finite}, labels {r.labels or '-'}",
        flush=True,
    )
    return rec


def built_metrics(results: list[dict], set_name: str) -> dict:
    """Against how the runs were built, and against ``harmful``."""
    broken = [r for r in results if r["kind"] == "broken"]
    healthy = [r for r in results if r["kind"] == "healthy"]
    harmful = [r for r in results if r["harmful"]]
    return {
        "built_broken": len(broken),
        "built_broken_detected": sum(1 for r in broken if _first(r, set_name)),
        "built_healthy": len(healthy),
        "built_healthy_alarms": sum(1 for r in healthy if _first(r, set_name)),
        "harmful": len(harmful),
        "harmful_caught": sum(1 for r in harmful if _first(r, set_name)),
        "missed_built_broken": sorted(
            f"{r['case']}-s{r['seed']} (val {r['val_loss']:.3f})" for r in broken if not _first(r, set_name)
        ),
        "missed_harmful": sorted(f"{r['case']}-s{r['seed']}" for r in harmful if not _first(r, set_name)),
    }


def print_details(results: list[dict], sets: list[str]) -> dict:
    out = {}
    for set_name in sets:
        m = built_metrics(results, set_name)
        out[set_name] = m
        print(f"\n=== {set_name}: against how the runs were built, and harm ===")
        print(
            f"built broken detected {m['built_broken_detected']}/{m['built_broken']}; built healthy alarmed "
            f"{m['built_healthy_alarms']}/{m['built_healthy']}; harmful caught {m['harmful_caught']}/"
            f"{m['harmful']}"
        )
        print("  alarms on runs built healthy or labelled healthy (every firing rule, its first message):")
        for r in results:
            if r["kind"] == "healthy" or not r["labels"]:
                for conf, f in sorted(r["firings"][set_name].items()):
                    if f["first_step"] is not None:
                        print(
                            f"    {r['case']}-s{r['seed']} [{r['kind']}, labels {r['labels'] or '-'}] {conf} "
                            f"at step {f['first_step']}: {f['details']}"
                        )
        print("  missed runs built broken (final validation loss, harmful, labels):")
        for r in results:
            if r["kind"] == "broken" and not _first(r, set_name):
                print(
                    f"    {r['case']}-s{r['seed']}: val {r['val_loss']:.3f}, harmful {r['harmful']}, "
                    f"labels {r['labels'] or '-'}"
                )
    return out


def print_runs(results: list[dict], sets: list[str]) -> None:
    print("\n=== runs ===")
    for r in results:
        fires = []
        for set_name in sets:
            f = _first(r, set_name)
            fires.append(f"{set_name}: {'-' if f is None else f'{f[1]}@{f[0]}'}")
        print(
            f"{r['case']:28s} s{r['seed']} {r['kind']:7s} val {r['val_loss']:7.3f} train "
            f"{r['final_train_loss']:7.3f} harmful {int(r['harmful'])} labels {r['labels'] or '-'} "
            f"onset {r['onset']} | {'; '.join(fires)}"
        )


def score_and_report(runs: list[dict], json_path: str | None, start: float) -> None:
    """Run the ``llm`` and ``recommended`` sets on every trial of ``runs`` (already marked harmful), print the
    tables and write ``json_path``; shared by the text LM families' scorers (moetext's too)."""
    trained = time.perf_counter()
    sets = {"llm": LLM_RULES, "recommended": rule_sets()["recommended"]}
    results = [evaluate_one((r, sets)) for r in runs]
    evaluated = time.perf_counter()
    if json_path:  # the firings first: a printing error below loses nothing
        Path(json_path).write_text(json.dumps({"runs": results}, indent=1, default=str))
    print_runs(results, list(sets))
    numbers = {"labels": report(results, list(sets)), "built": print_details(results, list(sets))}
    healthy_val = [r["val_loss"] for r in results if r["kind"] == "healthy"]
    print(
        f"\n{len(runs)} runs; training {trained - start:.0f} s (median run "
        f"{statistics.median(r['seconds'] for r in runs):.0f} s), rules {evaluated - trained:.0f} s; "
        f"built-healthy validation loss {min(healthy_val):.3f}..{max(healthy_val):.3f} nats"
    )
    if json_path:
        Path(json_path).write_text(json.dumps({"numbers": numbers, "runs": results}, indent=1, default=str))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1", help="comma-separated seeds (default 0,1)")
    ap.add_argument("--cases", default="", help="only the cases whose name matches this regex (re.search)")
    ap.add_argument("--out", help="keep the trials and runs.json here (default: a temporary folder, removed)")
    ap.add_argument("--json", help="write the numbers and every run's record and firings here")
    ap.add_argument("--reuse", help="a runs.json of a previous --out: score its trials (no training)")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    start = time.perf_counter()
    root = args.out or tempfile.mkdtemp(prefix="tornasole-textlm-")
    if args.reuse:
        runs = json.loads(Path(args.reuse).read_text())
    else:
        os.makedirs(root, exist_ok=True)
        print(f"unigram entropy of the training split: {textlm.unigram_entropy():.3f} nats", flush=True)
        runs = [train_one(n, s, root) for s in seeds for n in textlm.CASES if re.search(args.cases, n)]
        textlm.mark_harmful(runs)
        Path(root, "runs.json").write_text(json.dumps(runs, indent=1))
    textlm.mark_harmful(runs)
    score_and_report(runs, args.json, start)
    if not args.out and not args.reuse:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

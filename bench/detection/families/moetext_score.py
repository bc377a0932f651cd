"""Score the LLM rules and the recommended rules once on the held-out mixture-of-experts character-level LM
family (:mod:`families.moetext`, issue 29).

Usage::

    python bench/detection/families/moetext_score.py --seeds 0,1 --out DIR --json out.json
    python bench/detection/families/moetext_score.py --reuse DIR/runs.json --json out.json   # rules only
    python bench/detection/families/moetext_score.py --seeds 0,1 --out DIR --train-only      # no rules

Trains every case of :mod:`families.moetext` for each seed, one process, one thread (the trials and a
``runs.json`` of the runs' records are kept in ``--out``), marks each run ``harmful``
(:func:`families.moetext.mark_harmful`), then runs two rule sets on every trial: ``llm`` (``lm_score``'s nine
rules at their defaults) and ``recommended``. Printed: ``lm_score.report`` (recall against the labels, false
alarms on runs no label flags, median first firing minus onset, per rule), then recall on the runs built
broken and alarms on the runs built healthy, the harmful runs caught, every alarm on a healthy run with its
message, and every missed broken run with its final validation loss. ``--train-only`` trains and writes
``runs.json`` (after every run, so a cut-short session keeps what it trained) and runs no rule.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)

from families import moetext  # noqa: E402
from families.textlm_score import score_and_report, trained_record  # noqa: E402  (as textlm's)

FAMILY = "moetext"


def train_one(name: str, seed: int, root: str) -> dict:
    rec, r = trained_record(moetext, FAMILY, name, seed, root)
    print(
        f"  {name}-s{seed}: {r.seconds:.0f} s, train {r.final_train_loss:.3f}, val {r.val_loss:.3f}, "
        f"non-finite {r.non_finite}, labels {r.labels or '-'}, dropped {r.record['dropped_share']:.2f}, "
        f"router stretches {_stretch(r.record['router_stretch'])}",
        flush=True,
    )
    return rec


def _stretch(st: dict) -> str:
    """``zero L@S (layer/expert), starved L@S (layer/expert)``."""
    return ", ".join(
        f"{key} {v['length']}@{v['start']} ({v['layer']}/{v['expert']})" for key, v in sorted(st.items())
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1", help="comma-separated seeds (default 0,1)")
    ap.add_argument("--cases", default="", help="only the cases whose name matches this regex (re.search)")
    ap.add_argument("--out", help="keep the trials and runs.json here (default: a temporary folder, removed)")
    ap.add_argument("--json", help="write the numbers and every run's record and firings here")
    ap.add_argument("--reuse", help="a runs.json of a previous --out: score its trials (no training)")
    ap.add_argument("--train-only", action="store_true", help="train, write runs.json, run no rule")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    start = time.perf_counter()
    root = args.out or tempfile.mkdtemp(prefix="tornasole-moetext-")
    if args.reuse:
        runs = json.loads(Path(args.reuse).read_text())
    else:
        os.makedirs(root, exist_ok=True)
        print(f"unigram entropy of the training split: {moetext.unigram_entropy():.3f} nats", flush=True)
        runs = []
        for s in seeds:
            for n in moetext.CASES:
                if re.search(args.cases, n):
                    runs.append(train_one(n, s, root))
                    moetext.mark_harmful(runs)
                    Path(root, "runs.json").write_text(json.dumps(runs, indent=1))
        print(f"trained {len(runs)} runs in {time.perf_counter() - start:.0f} s", flush=True)
        if args.train_only:
            return 0
    moetext.mark_harmful(runs)
    score_and_report(runs, args.json, start)
    if not args.out and not args.reuse:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

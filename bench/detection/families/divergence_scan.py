"""EarlyLossDivergence alone on saved benchmark trials: where it fires, and the losses it judged.

Usage::

    python bench/detection/families/divergence_scan.py --runs DIR/runs.json [--runs DIR2/runs.json ...]
        [--only SPLITS] [--tell-classes] [--param name=value ...] [--dump out.json]

``--runs``: the ``runs.json`` a ``score.py --out DIR`` or ``run.py --out DIR`` run left (every run's path,
case, seed, kind and labels), or the ``--json`` output of ``lm_score.py --out DIR``. ``--tell-classes``: give
the rule ``num_classes``, the width of the trial's last saved ``weights/fcK.weight`` (``run.py``'s runs name
their loss ``loss``, so the rule cannot read its kind; a registered ``CrossEntropyLoss`` would tell it).
Prints, per benchmark split or family, the runs it fires on: built healthy (and, for ``run.py``, labelled
healthy) and built broken, each with its case, seed and first firing step. ``--dump``: every run's judged loss
(TRAIN and EVAL steps and values, the chance level) for the runs it fires on with
``confirm_by_validation=False`` (a divergence), to study a criterion offline.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import re
import sys
from collections import defaultdict
from pathlib import Path

from tornasole.modes import EVAL, TRAIN
from tornasole.rules import create_rule, invoke_rule
from tornasole.rules.builtin.base import as_float
from tornasole.rules.builtin.losses import loss_names
from tornasole.trials import create_trial

_FC = re.compile(r"^weights/fc(\d+)\.weight$")


def class_count(trial) -> int | None:
    """The width of the last ``weights/fcK.weight`` (``run.py``'s output layer), or None."""
    layers = sorted(
        ((int(m.group(1)), n) for n in trial.tensor_names() if (m := _FC.match(n))), key=lambda kn: kn[0]
    )
    if not layers:
        return None
    name = layers[-1][1]
    step = trial.tensor(name).steps()[0]
    return int(trial.tensor(name).value(step).shape[0])


def judged_losses(rule, trial) -> list[dict]:
    """Every loss with a chance level: its TRAIN and EVAL (step, value) pairs and the level."""
    out = []
    for name in loss_names(rule, batch_losses=True):
        train = trial.tensor(name).steps(mode=TRAIN)
        if not train:
            continue
        chance = rule._chance(name, trial.tensor(name).steps()[0])
        if chance is None:
            continue
        t = trial.tensor(name)
        out.append(
            {
                "name": name,
                "chance": chance[0],
                "train": [[s, as_float(t.value(s, mode=TRAIN))] for s in train],
                "eval": [[s, as_float(t.value(s, mode=EVAL))] for s in t.steps(mode=EVAL)],
                "train_global": [trial.global_step(TRAIN, s) for s in train],
                "eval_global": [trial.global_step(EVAL, s) for s in t.steps(mode=EVAL)],
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", action="append", required=True, help="runs.json or lm_score's json")
    ap.add_argument("--tell-classes", action="store_true", help="num_classes from the last fcK layer")
    ap.add_argument("--param", action="append", default=[], help="a rule parameter, name=value")
    ap.add_argument("--only", help="comma-separated splits or families: only their runs")
    ap.add_argument("--dump", help="write the judged losses of the runs that diverge here")
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)
    params = dict(p.split("=", 1) for p in args.param)
    loaded = [json.loads(Path(f).read_text()) for f in args.runs]
    runs = [r for d in loaded for r in (d["runs"] if isinstance(d, dict) else d)]  # lm_score.py's --json
    if args.only:
        only = set(args.only.split(","))
        runs = [r for r in runs if (r.get("family") or r.get("split")) in only]
    fired: dict[str, list[str]] = defaultdict(list)
    totals: dict[str, int] = defaultdict(int)
    dumps = []
    for r in runs:
        group = r.get("family") or r.get("split")
        labelled = "labels" in r and "family" not in r
        quiet = labelled and r["kind"] == "healthy" and not r["labels"]
        kind = r["kind"] + ("/labelled-healthy" if quiet else "")
        trial = create_trial(r["path"], collections_timeout=5.0, poll_interval=0.05)
        extra = {}
        if args.tell_classes:
            c = class_count(trial)
            if c is not None:
                extra["num_classes"] = str(c)
        for k in {r["kind"], kind}:
            totals[f"{group} {k}"] += 1
        rule = create_rule("EarlyLossDivergence", trial, **{**params, **extra})
        summary = invoke_rule(rule)
        if summary.fired:
            for k in {r["kind"], kind}:
                fired[f"{group} {k}"].append(f"{r['case']} s{r['seed']} @{summary.fired[0].step}")
        if args.dump:
            at_once = {**params, **extra, "confirm_by_validation": "False"}
            bare = create_rule("EarlyLossDivergence", trial, **at_once)
            if invoke_rule(bare).fired:
                dumps.append({**r, "fired": bool(summary.fired), "losses": judged_losses(bare, trial)})
    for key in sorted(totals):
        names = fired.get(key, [])
        print(f"{key}: {len(names)}/{totals[key]}" + (f"  {', '.join(names)}" if names else ""))
    if args.dump:
        Path(args.dump).write_text(json.dumps(dumps, default=lambda x: None if math.isnan(x) else x))
    return 0


if __name__ == "__main__":
    sys.exit(main())

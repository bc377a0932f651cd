"""Detection benchmark: do the rules catch broken training runs, and stay quiet on healthy ones?

Usage::

    python bench/detection/run.py                   # the default splits: train, evaluate, print the tables
    python bench/detection/run.py --split all       # every split (about twelve minutes on 2 cores)
    python bench/detection/run.py --reuse DIR       # re-evaluate trials a previous run left in DIR
    python bench/detection/run.py --split cal,dev   # only these splits (what rule work may look at)

Runs: :mod:`cases` (broken runs re-implemented from AUTOTRAINER, DeepDiagnosis, DeepLocalize, UMLAUT and
TrainCheck, their healthy twins, hard negatives), 3 seeds each, trained by :mod:`training` (tiny PyTorch
MLPs, one thread, a validation pass every epoch), labelled by :mod:`labels` from the published criteria
while they train. Eleven splits (``SPLIT_SEEDS``): "cal" calibrates the recommended rules; "dev" (the
held-out split of revisions one to four, seen in each) is for development; "fresh" was the held-out split
of the fifth revision (the "dev" cases at seeds 100-102 and the variant-C cases), read once then and
studied in the sixth, so it is a development split now; "fresh2" is the held-out split of the sixth
revision: the "dev" and variant-C cases at seeds no revision had run (200-202) and the variant-D cases,
written and committed before the sixth revision's rules were evaluated on any of them, evaluated once,
after those rules were frozen (the seventh revision studied it); "fresh3" is the held-out split of the
seventh revision: the "dev", variant-C and variant-D cases at seeds 300-302 and the variant-E cases, written
and committed before the seventh revision's rules were evaluated on any of them (the eighth revision
studied it); "fresh4" is the held-out split of the eighth revision: the "dev" and variant-C to variant-E
cases at seeds 400-402 and the variant-F cases, written and committed before the eighth revision's rules
were evaluated on any of them (the ninth revision studied it); "fresh5" is the held-out split of the ninth
revision: the "dev" and variant-C to variant-F cases at seeds 500-502 and the variant-G cases, written and
committed before the ninth revision's rules were evaluated on any of them (the tenth revision studied it);
"fresh6" is the held-out split of the tenth revision: the "dev" and variant-C to variant-G cases at seeds
600-602 and the variant-H cases, written and committed before the tenth revision's rules were evaluated on
any of them (the eleventh revision studied it); "fresh7" is the held-out split of the eleventh revision: the
"dev" and variant-C to variant-H cases at seeds 700-702 and the variant-I cases, written and committed
before the eleventh revision's rules were evaluated on any of them (the twelfth revision studied it);
"fresh8" is the held-out split of the twelfth revision: the "dev" and variant-C to variant-I cases at seeds
800-802 and the variant-J cases, written and committed before the twelfth revision's rules were evaluated
on any of them (the thirteenth revision studied it); "fresh9" is the held-out split of the thirteenth
revision: the "dev" and variant-C to variant-J cases at seeds 900-902 and the variant-K cases, written and
committed before the thirteenth revision's rules were evaluated on any of them. Its numbers are the ones to
report; from the fourteenth revision on it is a development split.

By default ``run.py`` runs ``DEFAULT_SPLITS``: calibration, development and the two newest held-out
splits (each held-out split reruns every earlier case at new seeds, so the older ones add runs, not cases;
``--split all`` runs every split, about twelve minutes on 2 cores).

Two rule sets are evaluated on every trial with ``invoke_rule``: SageMaker's defaults
(``rule_configs``, every deep-learning rule) and ``tornasole.rules.recommended_rules()``.

Printed per split and rule set: per-rule precision (runs it fired on that are
labelled broken) and recall (labelled runs of the problems it targets that it fired on), run-level recall
(broken runs where any rule fired), the false-alarm rate (healthy runs where any rule fired) and the median
latency from onset to first firing, in TRAIN steps (a firing at an EVAL step counts the TRAIN steps before
it), with the share of detections within one save interval (``training.SAVE_INTERVAL`` TRAIN steps).
Two rows show where the labels and the way a run was built disagree: "misses built healthy" (of the
missed runs, those built healthy that a label criterion flags) and "alarms on built-healthy" (false alarms
on the runs built healthy and labelled healthy, out of those runs; the rest of the false alarms are on runs
built broken whose seed meets no criterion).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import CASES  # noqa: E402
from training import SAVE_INTERVAL, run  # noqa: E402

#: The held-out splits in the order they were written: the k-th (from 1) reruns the "dev" cases and the
#: cases of every held-out split before it, and adds its own, all at seeds 100k to 100k + 2.
HELD_OUT = ("fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7", "fresh8", "fresh9")
#: ``{split: ((case split, seeds), ...)}``: which cases run at which seeds in each benchmark split.
SPLIT_SEEDS: dict[str, tuple[tuple[str, tuple[int, ...]], ...]] = {
    "cal": (("cal", (0, 1, 2)),),
    "dev": (("dev", (0, 1, 2)),),
    **{
        split: tuple((cases, (100 * k, 100 * k + 1, 100 * k + 2)) for cases in ("dev", *HELD_OUT[:k]))
        for k, split in enumerate(HELD_OUT, start=1)
    },
}
#: What ``run.py`` runs without ``--split``: under five minutes on 2 cores.
DEFAULT_SPLITS = ("cal", "dev", "fresh8", "fresh9")
SPLIT_TITLES = {
    "cal": "CALIBRATION split (variant A, seeds 0-2)",
    "dev": "DEVELOPMENT split (variant B, seeds 0-2; the held-out split of revisions 1-4, seen in each)",
    "fresh": "FRESH split of revision 5 (variant B at seeds 100-102, variant C; held out until revision 5)",
    "fresh2": "HELD-OUT split of revision 6 (variants B-C at seeds 200-202, variant D; read once in rev. 6)",
    "fresh3": "HELD-OUT split of revision 7 (variants B-D at seeds 300-302, variant E; read once in rev. 7)",
    "fresh4": "HELD-OUT split of revision 8 (variants B-E at seeds 400-402, variant F; read once in rev. 8)",
    "fresh5": "HELD-OUT split of revision 9 (variants B-F at seeds 500-502, variant G; read once in rev. 9)",
    "fresh6": "HELD-OUT split of revision 10 (variants B-G at seeds 600-602, variant H; read in rev. 10)",
    "fresh7": (
        "HELD-OUT split of revision 11 (variants B-H at seeds 700-702, variant I; read once in rev. 11)"
    ),
    "fresh8": (
        "HELD-OUT split of revision 12 (variants B-I at seeds 800-802, variant J; read once in rev. 12)"
    ),
    "fresh9": "HELD-OUT split of revision 13 (variants B-J at seeds 900-902, variant K; evaluated once)",
}
#: The problems (labels) each rule is meant to catch: its recall is measured on runs with these labels.
TARGETS = {
    "VanishingGradient": {"vanishing"},
    "ExplodingTensor": {"nan"},
    "WeightUpdateRatio": {"exploding", "unchanged"},
    "DeadRelu": {"dying_relu"},
    "PoorWeightInitialization": {"vanishing", "exploding", "dying_relu", "saturation"},
    "SaturatedActivation": {"saturation"},
    "LossNotDecreasing": {"slow", "unchanged"},
    "Overfit": {"overfit"},
    "Overtraining": {"overfit", "slow"},
    "OscillatingLoss": {"oscillating"},
    "OscillatingAccuracy": {"oscillating"},
    "ZeroGradients": {"dying_relu"},
    "StalledLoss": {"slow", "unchanged"},
    "SlowConvergence": {"slow"},
    "UnchangedTensor": {"unchanged"},
}
SAGEMAKER_DL_RULES = (
    "VanishingGradient",
    "ExplodingTensor",
    "WeightUpdateRatio",
    "DeadRelu",
    "PoorWeightInitialization",
    "SaturatedActivation",
    "LossNotDecreasing",
    "Overfit",
    "Overtraining",
)


def rule_sets() -> dict[str, list[tuple[str, str, dict[str, str]]]]:
    """``{set name: [(configuration name, rule_to_invoke, parameters)]}``."""
    from tornasole.rules import recommended_rules, rule_configs

    def entries(configs: list[dict]) -> list[tuple[str, str, dict[str, str]]]:
        out = []
        for c in configs:
            c = c.get("DebugRuleConfiguration", c)
            params = dict(c["RuleParameters"])
            out.append((c["RuleConfigurationName"], params.pop("rule_to_invoke"), params))
        return out

    sagemaker = [getattr(rule_configs, _snake(n))() for n in SAGEMAKER_DL_RULES]
    return {"sagemaker-defaults": entries(sagemaker), "recommended": entries(recommended_rules())}


def _snake(name: str) -> str:
    import re

    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def jobs_for(splits: list[str]) -> list[tuple[str, int, str]]:
    """``(case, seed, split)`` of every run the named splits hold, in order."""
    out = []
    for split in splits:
        for case_split, seeds in SPLIT_SEEDS[split]:
            out += [(n, s, split) for n, (_, cs, _) in CASES.items() if cs == case_split for s in seeds]
    return out


def train_one(job: tuple[str, int, str, str]) -> dict:
    name, seed, split, root = job
    kind, _, spec = CASES[name]
    path = os.path.join(root, f"{name}-s{seed}")  # a case's seeds differ between splits: paths never clash
    shutil.rmtree(path, ignore_errors=True)
    r = run(name, spec, seed, path)
    return {
        "case": name,
        "seed": seed,
        "kind": kind,
        "split": split,
        "path": path,
        "labels": r.labels,
        "onset": r.onset,
        "established": r.established,
        "train_before": r.train_before,
        "final_val_acc": r.final_val_acc,
        "val_acc": r.val_acc,
        "train_acc": r.train_acc,
    }


def evaluate_one(job: tuple[dict, dict]) -> dict:
    """First firing step of every configured rule on one trial, per rule set."""
    import logging

    from tornasole.rules import create_rule, invoke_rule
    from tornasole.trials import create_trial

    logging.disable(logging.WARNING)
    meta, sets = job
    trial = create_trial(meta["path"], collections_timeout=5.0, poll_interval=0.05)
    firings: dict[str, dict[str, dict]] = {}
    done: dict[str, dict] = {}  # a configuration both sets hold is evaluated once
    for set_name, entries in sets.items():
        firings[set_name] = {}
        for conf_name, rule_name, params in entries:
            key = json.dumps([rule_name, params], sort_keys=True)
            if key not in done:
                summary = invoke_rule(create_rule(rule_name, trial, **params))
                first = summary.fired[0] if summary.fired else None
                done[key] = {
                    "rule": rule_name,
                    "first_step": None if first is None else first.step,
                    "details": None if first is None else first.details,
                }
            firings[set_name][conf_name] = done[key]
    return {**meta, "firings": firings}


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def metrics(results: list[dict], set_name: str) -> dict:
    broken = [r for r in results if r["labels"]]
    healthy = [r for r in results if not r["labels"]]
    per_rule: dict[str, dict] = {}
    latencies, within, within_established = [], 0, 0
    detected = 0
    for r in broken:
        fires = [f["first_step"] for f in r["firings"][set_name].values() if f["first_step"] is not None]
        if fires:
            detected += 1
            first = min(fires)
            tb = r["train_before"]
            lat = tb[first] - tb[r["onset"]] if first < len(tb) else None
            if lat is not None:
                latencies.append(lat)
                within += lat <= SAVE_INTERVAL
                # trials of revisions 1-11 have no "established": there it is the onset
                established = r.get("established", r["onset"])
                within_established += tb[first] - tb[established] <= SAVE_INTERVAL

    def fires(r: dict) -> bool:
        return any(f["first_step"] is not None for f in r["firings"][set_name].values())

    alarms = sum(1 for r in healthy if fires(r))
    # Where the labels and the way a run was built disagree: a run built healthy that a label flags, a run
    # built broken whose seed meets no criterion. Printed so a reader sees how much of the misses and false
    # alarms sits there (no rule can agree with a label criterion and with the construction at once).
    missed = [r for r in broken if not fires(r)]
    built_healthy = [r for r in healthy if r["kind"] == "healthy"]
    conf_names = list(results[0]["firings"][set_name]) if results else []
    for conf in conf_names:
        rule = results[0]["firings"][set_name][conf]["rule"]
        fired = [r for r in results if r["firings"][set_name][conf]["first_step"] is not None]
        targets = TARGETS.get(rule, set())
        targeted = [r for r in results if targets & set(r["labels"])]
        hit = [r for r in targeted if r["firings"][set_name][conf]["first_step"] is not None]
        per_rule[conf] = {
            "fired": len(fired),
            "precision": (sum(1 for r in fired if r["labels"]) / len(fired)) if fired else None,
            "recall": (len(hit) / len(targeted)) if targeted else None,
            "targeted": len(targeted),
            "false_alarms": sum(1 for r in fired if not r["labels"]),
        }
    return {
        "runs": len(results),
        "broken": len(broken),
        "healthy": len(healthy),
        "run_recall": detected / len(broken) if broken else None,
        "detected": detected,
        "false_alarm_rate": alarms / len(healthy) if healthy else None,
        "false_alarms": alarms,
        "misses_built_healthy": sum(1 for r in missed if r["kind"] == "healthy"),
        "healthy_built_healthy": len(built_healthy),
        "false_alarms_built_healthy": sum(1 for r in built_healthy if fires(r)),
        "median_latency_train_steps": _median(latencies),
        "within_one_save_interval": (within / len(latencies)) if latencies else None,
        "within_one_save_interval_of_established": (
            (within_established / len(latencies)) if latencies else None
        ),
        "per_rule": per_rule,
    }


def _fmt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.0f}%" if pct else f"{x:.2f}"


def report(results: list[dict], set_names: list[str]) -> dict:
    out = {}
    for split in SPLIT_SEEDS:
        rs = [r for r in results if r["split"] == split]
        if not rs:
            continue
        title = SPLIT_TITLES[split]
        print(f"\n=== {title}: {len(rs)} runs, {sum(1 for r in rs if r['labels'])} labelled broken ===")
        ms = {s: metrics(rs, s) for s in set_names}
        out[split] = ms
        print(f"{'':28s}" + "".join(f"{s:>24s}" for s in set_names))
        rows = [
            ("run-level recall", lambda m: f"{m['detected']}/{m['broken']} = {_fmt(m['run_recall'])}"),
            (
                "false alarms (healthy)",
                lambda m: f"{m['false_alarms']}/{m['healthy']} = {_fmt(m['false_alarm_rate'], True)}",
            ),
            (
                "misses built healthy",
                lambda m: f"{m['misses_built_healthy']} of {m['broken'] - m['detected']}",
            ),
            (
                "alarms on built-healthy",
                lambda m: (
                    f"{m['false_alarms_built_healthy']}/{m['healthy_built_healthy']}"
                    f" = {_fmt(m['false_alarms_built_healthy'] / max(m['healthy_built_healthy'], 1), True)}"
                ),
            ),
            ("median latency (TRAIN st)", lambda m: _fmt(m["median_latency_train_steps"])),
            (f"within {SAVE_INTERVAL} TRAIN steps", lambda m: _fmt(m["within_one_save_interval"], True)),
            (
                "  of when the label held",
                lambda m: _fmt(m["within_one_save_interval_of_established"], True),
            ),
        ]
        for label, fn in rows:
            print(f"{label:28s}" + "".join(f"{fn(ms[s]):>24s}" for s in set_names))
        for s in set_names:
            print(f"  {s}: per rule (fired / precision / recall on targeted runs / false alarms)")
            for conf, v in ms[s]["per_rule"].items():
                print(
                    f"    {conf:34s} fired {v['fired']:3d}  precision {_fmt(v['precision']):>5s}  "
                    f"recall {_fmt(v['recall']):>5s} (of {v['targeted']:2d})  "
                    f"false alarms {v['false_alarms']:2d}"
                )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="directory for the trials (default: a temporary one, removed at the end)")
    ap.add_argument("--reuse", help="evaluate the trials and labels a previous run left in this directory")
    ap.add_argument(
        "--split",
        default=",".join(DEFAULT_SPLITS),
        help="comma-separated splits among cal, dev, fresh, fresh2 to fresh9, or all (default: "
        + ",".join(DEFAULT_SPLITS)
        + ")",
    )
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--json", help="write the numbers here")
    args = ap.parse_args(argv)
    splits = list(SPLIT_SEEDS) if args.split == "all" else [s for s in args.split.split(",") if s]
    unknown = sorted(set(splits) - set(SPLIT_SEEDS))
    if unknown or not splits:
        names = ", ".join(unknown) or "(none)"
        ap.error(f"--split: unknown split(s) {names}; choose among {', '.join(SPLIT_SEEDS)}")
    start = time.perf_counter()
    ctx = get_context("fork")
    root = args.reuse or args.out or tempfile.mkdtemp(prefix="tornasole-detection-")
    runs_file = os.path.join(root, "runs.json")
    with ctx.Pool(args.processes) as pool:
        if args.reuse:
            runs = json.loads(Path(runs_file).read_text())
            for r in runs:  # trials of revisions 1-4 call the development split "held"
                r["split"] = "dev" if r["split"] == "held" else r["split"]
        else:
            jobs = [(n, s, split, root) for n, s, split in jobs_for(splits)]
            runs = pool.map(train_one, jobs, chunksize=1)
            Path(runs_file).write_text(json.dumps(runs))
        trained = time.perf_counter()
        runs = [r for r in runs if r["split"] in splits]
        sets = rule_sets()
        results = pool.map(evaluate_one, [(r, sets) for r in runs], chunksize=1)
    evaluated = time.perf_counter()
    numbers = report(results, list(sets))
    print(
        f"\n{len(runs)} runs; training {trained - start:.0f} s, rules {evaluated - trained:.0f} s, "
        f"total {evaluated - start:.0f} s ({args.processes} processes)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"numbers": numbers, "runs": results}, indent=1, default=str))
    if not (args.out or args.reuse):
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

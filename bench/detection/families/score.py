"""Score the rules on the families benchmark, one family left out at a time.

Usage::

    python bench/detection/families/score.py                      # every family, seeds 0-1, both rule sets
    python bench/detection/families/score.py --families cnn,rnn --seeds 0
    python bench/detection/families/score.py --json out.json --out DIR   # keep the numbers and the trials
    python bench/detection/families/score.py --reuse DIR          # re-evaluate the trials a run left in DIR
    python bench/detection/families/score.py --families softmax --cases healthy,warm_restarts   # these cases
    python bench/detection/families/score.py --families amp_cnn --device cuda   # PyTorch runs on a GPU
    python bench/detection/families/score.py --recount out.json --json new.json   # count saved firings again
    python bench/detection/families/score.py --recount out.json --patch CONF=scan.json --json new.json

Leave-one-family-out: the rules (``tornasole.rules.recommended_rules()``) are fixed; a parameter may be
calibrated only on the families that are not scored, so each family's numbers are what the rules do on runs of
a family they were not tuned on. Printed per family: run-level recall against the labels (runs a published
criterion flags, :mod:`labels`), false alarms on the runs no criterion flags, median latency from the onset
in TRAIN steps and the share within one save interval, and the same recall/false alarms against what each
run was *built* to be (a bug only an accuracy shows, such as permuted labels, meets no criterion), and
against the labels with UMLAUT's overfitting read over three rising epochs ("3 ep.", the benchmark's reading
until the fifteenth revision; UMLAUT's own criterion is one epoch, and flags validation noise); then the
rules behind the false alarms. The headline is the worst family (lowest recall, then most false alarms),
never the mean. A run built healthy that ended no better than the input-independent baseline collapsed
(:func:`families.counting.collapsed`): it is counted apart, with the rule that fired on it, not as a
healthy run.
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
from collections import Counter
from importlib.util import find_spec
from multiprocessing import get_context
from pathlib import Path

import numpy as np

# bench/detection first: its run.py/labels.py are imported by name (this folder's training.py must not
# shadow bench/detection/training.py).
sys.path[0] = str(Path(__file__).resolve().parent.parent)

from run import evaluate_one, rule_sets  # noqa: E402

from families import data  # noqa: E402
from families.cases import CASES, SCORED_FAMILIES  # noqa: E402
from families.counting import (  # noqa: E402
    collapsed,
    harmful,
    null_score,
    twin_of,
    twin_quiet_configurations,
    worst_family,
)
from families.counting import fires as _fires  # noqa: E402
from families.training import DEVICE_ENV, SAVE_INTERVAL  # noqa: E402
from families.training import FAMILIES as RECIPES  # noqa: E402
from families.training import run as train_run  # noqa: E402

FAMILIES = SCORED_FAMILIES


def train_one(job: tuple[str, int, str]) -> dict:
    name, seed, root = job
    kind, family, spec = CASES[name]
    path = os.path.join(root, f"{name.replace('/', '-')}-s{seed}")
    shutil.rmtree(path, ignore_errors=True)
    if spec.framework == "keras":
        from families.keras_training import run_keras

        r = run_keras(name, spec, seed, path)
    else:
        r = train_run(name, spec, seed, path)
    return {
        "case": name,
        "family": family,
        "seed": seed,
        "kind": kind,
        "split": family,
        "path": path,
        "labels": r.labels,
        "variants": r.variants,
        "onset": r.onset,
        "established": r.established,
        "train_before": r.train_before,
        "final_val_acc": r.final_val_acc,
        # where and how a PyTorch run trained (``--device``; the precision and a GradScaler's skipped
        # steps); a Keras run's dtype policy and its LossScaleOptimizer's skipped steps and final scale
        "precision": r.precision,
        "scaler_skipped_steps": r.scaler_skipped_steps,
        "scaler_final_scale": r.scaler_final_scale,
        **({} if spec.framework == "keras" else {"device": r.device, "torch": r.torch_version}),
    }


def with_null_scores(runs: list[dict]) -> list[dict]:
    """Each run with ``null_score``: the input-independent baseline's score on the run's own validation set
    (:func:`families.counting.null_score`), from the recipe's data drawn again with the run's seed (the
    validation targets are the data's last ``n_val`` samples, which no fault touches). Runs a previous
    scoring recorded without it get it here, so the counting never needs the trials."""
    cache: dict[tuple[str, int], float] = {}
    out = []
    for r in runs:
        recipe = RECIPES[CASES[r["case"]][2].family]
        key = (recipe.data, r["seed"])
        if key not in cache:
            if recipe.task in ("classify", "binary", "multilabel"):
                _, y, _, n_val = getattr(data, recipe.data)(np.random.default_rng(r["seed"]))
                cache[key] = null_score(recipe.task, y[-n_val:])
            else:
                cache[key] = null_score(recipe.task, np.zeros(1))
        out.append({**r, "null_score": cache[key]})
    return out


def variant_labels(r: dict) -> dict[str, int]:
    """The run's labels with UMLAUT's overfitting read over three rising epochs (the benchmark's reading
    until the fifteenth revision, :attr:`labels.Monitor.variants`) instead of UMLAUT's one epoch."""
    labels = {k: v for k, v in r["labels"].items() if k != "overfit"}
    if "overfit_3_epochs" in r.get("variants", {}):
        labels["overfit"] = r["variants"]["overfit_3_epochs"]
    return labels


def _first_firings(r: dict, set_name: str) -> str:
    """``"LossSpike, GradientNormSpike at step 7919"``: every configuration that fired first, or "quiet"."""
    fired = _fires(r, set_name)
    if not fired:
        return "quiet"
    first = fired[0][0]
    return f"{', '.join(conf for step, conf in fired if step == first)} at step {first}"


def family_metrics(rs: list[dict], set_name: str) -> dict:
    """Recall/false alarms against the labels and against the construction, latency, alarm sources."""
    broken = [r for r in rs if r["labels"]]
    healthy = [r for r in rs if not r["labels"]]
    v_broken = [r for r in rs if variant_labels(r)]
    v_healthy = [r for r in rs if not variant_labels(r)]
    latencies = []
    for r in broken:
        fires = _fires(r, set_name)
        if fires and fires[0][0] < len(r["train_before"]):
            tb = r["train_before"]
            latencies.append(tb[fires[0][0]] - tb[r["onset"]])
    alarms = [r for r in healthy if _fires(r, set_name)]
    built_broken = [r for r in rs if r["kind"] == "broken"]
    built_healthy = [r for r in rs if r["kind"] == "healthy" and not collapsed(r)]
    fell = [r for r in rs if collapsed(r)]
    twin_quiet = {(r["case"], r["seed"]) for r in built_broken if twin_quiet_configurations(r, rs, set_name)}
    killed = [r for r in built_broken if harmful(r, rs)]
    sources = Counter(conf for r in alarms for _, conf in _fires(r, set_name)[:1])
    return {
        "runs": len(rs),
        "broken": len(broken),
        "detected": sum(1 for r in broken if _fires(r, set_name)),
        "healthy": len(healthy),
        "false_alarms": len(alarms),
        "median_latency_train_steps": statistics.median(latencies) if latencies else None,
        "within_one_save_interval": (
            sum(1 for x in latencies if x <= SAVE_INTERVAL) / len(latencies) if latencies else None
        ),
        "broken_3_epochs": len(v_broken),
        "detected_3_epochs": sum(1 for r in v_broken if _fires(r, set_name)),
        "healthy_3_epochs": len(v_healthy),
        "false_alarms_3_epochs": sum(1 for r in v_healthy if _fires(r, set_name)),
        "built_broken": len(built_broken),
        "built_broken_detected": sum(1 for r in built_broken if _fires(r, set_name)),
        "built_broken_detected_twin_quiet": len(twin_quiet),
        "built_broken_without_twin": sum(1 for r in built_broken if twin_of(r, rs) is None),
        "built_harmful": len(killed),
        "built_harmful_detected_twin_quiet": sum(1 for r in killed if (r["case"], r["seed"]) in twin_quiet),
        "built_missed_cases_twin_quiet": sorted(
            f"{r['case']}-s{r['seed']}" for r in built_broken if (r["case"], r["seed"]) not in twin_quiet
        ),
        "built_harmful_missed_cases": sorted(
            f"{r['case']}-s{r['seed']}" for r in killed if (r["case"], r["seed"]) not in twin_quiet
        ),
        "built_healthy": len(built_healthy),
        "built_healthy_alarms": sum(1 for r in built_healthy if _fires(r, set_name)),
        "built_healthy_collapsed": len(fell),
        "built_healthy_collapsed_cases": sorted(
            f"{r['case']}-s{r['seed']} (final {r['final_val_acc']:.3g}, baseline {r['null_score']:.3g}): "
            + _first_firings(r, set_name)
            for r in fell
        ),
        "alarm_first_rule": dict(sources),
        "false_alarm_cases": sorted(f"{r['case']}-s{r['seed']}:{_fires(r, set_name)[0][1]}" for r in alarms),
        "missed_cases": sorted(f"{r['case']}-s{r['seed']}" for r in broken if not _fires(r, set_name)),
    }


def _ratio(a: int, b: int) -> str:
    return f"{a}/{b} = {a / b:.2f}" if b else f"{a}/0"


def report(results: list[dict], set_names: list[str]) -> dict:
    out: dict[str, dict] = {}
    for set_name in set_names:
        print(f"\n=== {set_name}: per family left out ===")
        print(
            f"{'family':12s} {'recall (labels)':>18s} {'false alarms':>16s} {'lat':>5s} {'<=1 int':>8s}"
            f" {'recall (built)':>18s} {'alarms (built)':>16s}"
            f" {'recall (3 ep.)':>16s} {'alarms (3 ep.)':>16s}"
        )
        per = {}
        for family in FAMILIES:
            rs = [r for r in results if r["family"] == family]
            if not rs:
                continue
            m = family_metrics(rs, set_name)
            per[family] = m
            lat = m["median_latency_train_steps"]
            within = m["within_one_save_interval"]
            print(
                f"{family:12s} {_ratio(m['detected'], m['broken']):>18s} "
                f"{_ratio(m['false_alarms'], m['healthy']):>16s} {'-' if lat is None else f'{lat:g}':>5s} "
                f"{'-' if within is None else f'{100 * within:.0f}%':>8s} "
                f"{_ratio(m['built_broken_detected'], m['built_broken']):>18s} "
                f"{_ratio(m['built_healthy_alarms'], m['built_healthy']):>16s} "
                f"{_ratio(m['detected_3_epochs'], m['broken_3_epochs']):>16s} "
                f"{_ratio(m['false_alarms_3_epochs'], m['healthy_3_epochs']):>16s}"
            )
        for family, m in per.items():
            if m["alarm_first_rule"]:
                print(f"  {family}: false alarms by first rule {m['alarm_first_rule']}")

        def badness(fm: tuple[str, dict]) -> tuple[float, float]:
            m = fm[1]
            recall = m["detected"] / m["broken"] if m["broken"] else 1.0
            fa = m["false_alarms"] / m["healthy"] if m["healthy"] else 0.0
            return (recall, -fa)

        if per:
            worst_recall = min(per.items(), key=badness)
            worst_fa = max(per.items(), key=lambda fm: fm[1]["false_alarms"] / max(fm[1]["healthy"], 1))
            print(
                f"  WORST family by recall: {worst_recall[0]} "
                f"({_ratio(worst_recall[1]['detected'], worst_recall[1]['broken'])}); "
                f"by false alarms: {worst_fa[0]} "
                f"({_ratio(worst_fa[1]['false_alarms'], worst_fa[1]['healthy'])})"
            )
        built_table(per)
        out[set_name] = per
    return out


def built_table(per: dict[str, dict]) -> None:
    """Against the construction: recall counting only configurations quiet on the run's healthy twin (the
    headline), recall by any firing, alarms on built-healthy runs, and recall on the built-broken runs that
    did harm (DeepFD's killed mutants, :mod:`families.counting`); then the worst family of each column."""
    print(
        f"\n{'family':18s} {'recall (twin-quiet)':>20s} {'recall (any)':>16s} {'alarms':>16s}"
        f" {'harmful':>8s} {'recall (harmful)':>18s}"
    )
    for family, m in per.items():
        print(
            f"{family:18s} {_ratio(m['built_broken_detected_twin_quiet'], m['built_broken']):>20s} "
            f"{_ratio(m['built_broken_detected'], m['built_broken']):>16s} "
            f"{_ratio(m['built_healthy_alarms'], m['built_healthy']):>16s} "
            f"{m['built_harmful']:>8d} "
            f"{_ratio(m['built_harmful_detected_twin_quiet'], m['built_harmful']):>18s}"
        )
    for label, hits, total in (
        ("recall (built, twin-quiet; the headline)", "built_broken_detected_twin_quiet", "built_broken"),
        ("recall (built, any firing)", "built_broken_detected", "built_broken"),
        (
            "recall (built broken and harmful, twin-quiet)",
            "built_harmful_detected_twin_quiet",
            "built_harmful",
        ),
    ):
        worst = worst_family(per, hits, total)
        if worst is not None:
            print(f"  WORST family by {label}: {worst[0]} ({_ratio(worst[1], worst[2])})")
    for family, m in per.items():
        for case in m.get("built_healthy_collapsed_cases", []):
            print(f"  {family}: built healthy but collapsed (counted apart): {case}")
    alarms = {f: {**m, "quiet": m["built_healthy"] - m["built_healthy_alarms"]} for f, m in per.items()}
    worst = worst_family(alarms, "quiet", "built_healthy")
    if worst is not None and worst[1] == worst[2]:
        print("  WORST family by alarms on built-healthy runs: none alarmed")
    elif worst is not None:
        print(
            f"  WORST family by alarms on built-healthy runs: {worst[0]} "
            f"({_ratio(worst[2] - worst[1], worst[2])})"
        )


def patch_firings(results: list[dict], conf: str, scan_path: Path, set_name: str = "recommended") -> int:
    """Put the ``after`` firings of a ``rule_scan.py --json`` file in place of configuration ``conf``'s in
    ``results`` (a ``--json`` file's runs), run by run (case and seed); how many first firings moved. Why:
    every rule is judged on its own, so one configuration's firings computed alone over the kept trials
    replace the set's recorded ones exactly, and the run-level counts follow without running the set again.
    A run the scan did not judge, or a scan whose ``before`` disagrees with the recorded firing (the scan
    was not of these trials or of this configuration), is an error naming the run."""
    try:
        scanned = {(r["case"], r["seed"]): r for r in json.loads(scan_path.read_text())}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"--patch {conf}={scan_path}: not a rule_scan.py --json file ({e!r})") from None
    moved = 0
    for r in results:
        name = f"{r['case']}-s{r['seed']}"
        fired = r["firings"][set_name].get(conf)
        if fired is None:
            raise SystemExit(f"--patch {conf}={scan_path}: {name} has no firing of {conf} to replace")
        scan = scanned.get((r["case"], r["seed"]))
        if scan is None:
            raise SystemExit(f"--patch {conf}={scan_path}: {name} is not in the scan")
        before = scan.get("before")
        if before is not None and before["step"] != fired["first_step"]:
            raise SystemExit(
                f"--patch {conf}={scan_path}: {name}: the scan's before ({before['step']}) is not the "
                f"recorded first firing ({fired['first_step']}): not these trials or not this configuration"
            )
        after = scan["after"]
        moved += after["step"] != fired["first_step"]
        fired["first_step"], fired["details"] = after["step"], after["details"]
    return moved


def recount(path: Path, json_out: str | None, patches: list[str] | None = None) -> int:
    """The numbers of a previous ``--json`` file counted again from its runs' recorded firings: a change of
    the counting (:mod:`families.counting`) is applied to the same verdicts without running a rule; with
    ``patches`` (``CONF=SCAN.json``), one configuration's firings first replaced by a rule scan's
    (:func:`patch_firings`)."""
    try:
        saved = json.loads(path.read_text())
        results, set_names = saved["runs"], list(saved["numbers"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"--recount {path}: not a score.py --json file ({e!r})") from None
    for patch in patches or []:
        conf, sep, scan = patch.partition("=")
        if not sep or not conf or not scan:
            raise SystemExit(f"--patch {patch!r}: not CONF=SCAN.json")
        moved = patch_firings(results, conf, Path(scan))
        print(f"--patch {conf}: {moved} first firings moved")
    results = with_null_scores(results)
    numbers = report(results, set_names)
    print(f"\n{len(results)} runs counted again from {path}")
    if json_out:
        Path(json_out).write_text(json.dumps({"numbers": numbers, "runs": results}, indent=1, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--families", default=",".join(FAMILIES), help="comma-separated, among " + ", ".join(FAMILIES)
    )
    ap.add_argument(
        "--cases", default="", help="comma-separated case names (healthy, warm_restarts, ...): only these"
    )
    ap.add_argument("--seeds", default="0,1", help="comma-separated seeds (default 0,1)")
    ap.add_argument(
        "--sets", default="recommended", help="rule sets: recommended, sagemaker-defaults or both"
    )
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where the PyTorch runs train (default cpu; the workers read it from $" + DEVICE_ENV + ")",
    )
    ap.add_argument("--out", help="keep the trials here (default: a temporary folder, removed)")
    ap.add_argument("--reuse", help="evaluate the trials and labels a previous --out run left in this folder")
    ap.add_argument("--json", help="write the numbers and every run's firings here")
    ap.add_argument(
        "--recount",
        metavar="FILE",
        help="count again the firings a previous --json wrote to FILE (no trial is read, no rule runs)",
    )
    ap.add_argument(
        "--patch",
        action="append",
        metavar="CONF=SCAN",
        help="with --recount: configuration CONF's firings replaced by a rule_scan.py --json file's 'after' "
        "(its 'before' must match the recorded firings); repeatable",
    )
    args = ap.parse_args(argv)
    if args.patch and not args.recount:
        ap.error("--patch: only with --recount")
    if args.recount:
        return recount(Path(args.recount), args.json, args.patch)
    families = [f for f in args.families.split(",") if f]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown or not families:
        ap.error(f"--families: unknown {', '.join(unknown) or '(none)'}; choose among {', '.join(FAMILIES)}")
    keras_families = [f for f in families if f.endswith("_keras")]
    if keras_families and not args.reuse and not (find_spec("keras") and find_spec("tensorflow")):
        ap.error(
            f"--families: {', '.join(keras_families)} train with Keras 3 on TensorFlow, which are not "
            "installed (requirements/frameworks.txt); install them or name the PyTorch families only"
        )
    seeds = [int(s) for s in args.seeds.split(",") if s]
    sets = rule_sets()
    wanted = list(sets) if args.sets == "both" else [s for s in args.sets.split(",") if s]
    if not wanted or set(wanted) - set(sets):
        ap.error(f"--sets: choose among {', '.join(sets)} or both")
    sets = {k: v for k, v in sets.items() if k in wanted}
    # the workers train on this device: they read it from the environment, set before the pool starts
    os.environ[DEVICE_ENV] = args.device
    start = time.perf_counter()
    root = args.reuse or args.out or tempfile.mkdtemp(prefix="tornasole-families-")
    runs_file = Path(root) / "runs.json"
    only = {c for c in args.cases.split(",") if c}
    jobs = [
        (n, s, root)
        for n, (_, fam, _) in CASES.items()
        if fam in families and (not only or n.split("/", 1)[1] in only)
        for s in seeds
    ]
    with get_context("fork").Pool(args.processes) as pool:
        if args.reuse:
            wanted_runs = {(n, s) for n, s, _ in jobs}
            runs = [r for r in json.loads(runs_file.read_text()) if (r["case"], r["seed"]) in wanted_runs]
        else:
            runs = pool.map(train_one, jobs, chunksize=1)
            runs_file.write_text(json.dumps(runs))
        trained = time.perf_counter()
        results = pool.map(evaluate_one, [(r, sets) for r in runs], chunksize=1)
    evaluated = time.perf_counter()
    results = with_null_scores(results)
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

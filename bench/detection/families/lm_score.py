"""Score the rules for today's failures on the language-model families (issue 30 part 6).

Usage::

    python bench/detection/families/lm_score.py                    # lm and moe families, seed 0
    python bench/detection/families/lm_score.py --seeds 0 --json out.json --out DIR
    python bench/detection/families/lm_score.py --classic-healthy      # the new rules on the seven classic
                                                                        # families' healthy runs
    python bench/detection/families/lm_score.py --seeds 0,1 --lofo     # and leave-one-family-out
    python bench/detection/families/lm_score.py --reuse out.json       # re-score the trials a run kept
                                                                        # (--out DIR --json out.json)

Trains every case of :mod:`families.lm` (a causal transformer LM, a mixture-of-experts LM; healthy recipes,
hard negatives and one injected failure per case), saves them with the PyTorch hook at every step, labels
them with the published thresholds while they train, then runs two rule sets: ``llm`` (the nine rules of
issue 30 at their defaults) and ``recommended`` (``tornasole.rules.recommended_rules()``). Printed per
family: run-level recall against the labels, false alarms on the runs no criterion flags, the median first
firing latency from the labelled onset in steps (saved every step) and the share within one step; then, per
rule, the runs it fired on. No parameter is tuned on these runs (the defaults are the published ones), so
each family's numbers are those of a family the rules were not tuned on. ``--lofo`` checks what tuning
would do: each rule's main parameter over a small grid (:data:`LOFO_GRID`) is chosen on the other families
(no alarm on their healthy runs, then the most broken runs caught, then the default) and scored on the
held-out family; the worst held-out family is printed.
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
from multiprocessing import get_context
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)

from run import evaluate_one, rule_sets  # noqa: E402

from families.lm import LM_CASES  # noqa: E402
from families.lm import run as train_lm  # noqa: E402

#: The nine rules of issue 30, as a rule set of ``run.evaluate_one``: (configuration, rule, parameters).
LLM_RULES = [
    (n, n, {})
    for n in (
        "LossSpike",
        "GradientNormSpike",
        "NonFiniteOrigin",
        "LossScaleCollapse",
        "LearningRateDiscontinuity",
        "ExpertImbalance",
        "AttentionEntropyCollapse",
        "DataReplay",
        "AttentionLogitGrowth",
    )
]


#: Leave-one-family-out (``--lofo``): each rule's one parameter a user would tune, over a small grid around
#: its published default (``None``: the default itself, evaluated with no parameter given).
LOFO_GRID: dict[str, tuple[str, tuple[str | None, ...]]] = {
    "LossSpike": ("z_threshold", ("4", None, "8")),
    "GradientNormSpike": ("factor", ("5", None, "20")),
    "NonFiniteOrigin": ("skip_scaler_overflow", (None,)),
    "LossScaleCollapse": ("num_steps", ("5", None, "20")),
    "LearningRateDiscontinuity": ("max_drop_factor", ("2", None, "5")),
    "ExpertImbalance": ("dead_fraction", ("0.05", None, "0.2")),
    "AttentionEntropyCollapse": ("min_entropy", ("0.05", None, "0.2")),
    "DataReplay": ("min_run", ("1", None, "5")),
    "AttentionLogitGrowth": ("max_logit", ("50", None, "200")),
}


def lofo_rules() -> list[tuple[str, str, dict[str, str]]]:
    """The grid as one rule set: configuration ``Rule|parameter=value`` (``=default`` for the default)."""
    out = []
    for rule, (param, values) in LOFO_GRID.items():
        for v in values:
            out.append((f"{rule}|{param}={v or 'default'}", rule, {} if v is None else {param: v}))
    return out


def _fired(r: dict, set_name: str, confs: set[str]) -> tuple[int, str] | None:
    fires = sorted(
        (f["first_step"], c)
        for c, f in r["firings"][set_name].items()
        if c in confs and f["first_step"] is not None
    )
    return fires[0] if fires else None


def choose(train: list[dict]) -> dict[str, str]:
    """Per rule, the grid value chosen on ``train``: no firing on its healthy runs, then the most broken runs
    fired on, then the published default (then the first value) on ties."""
    chosen = {}
    for rule, (param, values) in LOFO_GRID.items():
        best: tuple | None = None
        for i, v in enumerate(values):
            conf = f"{rule}|{param}={v or 'default'}"
            alarms = sum(1 for r in train if not r["labels"] and _fired(r, "lofo", {conf}))
            hits = sum(1 for r in train if r["labels"] and _fired(r, "lofo", {conf}))
            key = (alarms == 0, hits, v is None, -i)
            if best is None or key > best[0]:
                best = (key, conf)
        chosen[rule] = best[1]
    return chosen


def lofo(results: list[dict]) -> dict:
    """Each family held out in turn: parameters chosen on the other families, scored on it once."""
    families = sorted({r["family"] for r in results})
    print("\n=== leave one family out: parameters chosen on the other families, scored on the held-out ===")
    out = {}
    for held in families:
        train = [r for r in results if r["family"] != held]
        test = [r for r in results if r["family"] == held]
        confs = choose(train)
        broken = [r for r in test if r["labels"]]
        healthy = [r for r in test if not r["labels"]]
        chosen = set(confs.values())
        latencies = [f[0] - r["onset"] for r in broken if (f := _fired(r, "lofo", chosen)) is not None]
        m = {
            "chosen": sorted(c for c in chosen if not c.endswith("=default")),
            "detected": sum(1 for r in broken if _fired(r, "lofo", chosen)),
            "broken": len(broken),
            "false_alarms": sum(1 for r in healthy if _fired(r, "lofo", chosen)),
            "healthy": len(healthy),
            "median_latency_steps": statistics.median(latencies) if latencies else None,
            "within_one_step": sum(1 for x in latencies if x <= 1) / len(latencies) if latencies else None,
            "missed_cases": sorted(
                f"{r['case']}-s{r['seed']}" for r in broken if not _fired(r, "lofo", chosen)
            ),
        }
        out[held] = m
        print(
            f"held out {held:5s}: recall {m['detected']}/{m['broken']}, false alarms {m['false_alarms']}/"
            f"{m['healthy']}, median latency {m['median_latency_steps']}, non-default choices "
            f"{', '.join(m['chosen']) or 'none (every rule at its default)'}"
        )
        if m["missed_cases"]:
            print(f"  missed: {', '.join(m['missed_cases'])}")
    worst = min(out, key=lambda f: (out[f]["detected"] / max(out[f]["broken"], 1), -out[f]["false_alarms"]))
    print(f"worst held-out family: {worst}")
    return out


def train_one(job: tuple[str, int, str]) -> dict:
    name, seed, root = job
    kind, family, spec = LM_CASES[name]
    path = os.path.join(root, f"{name.replace('/', '-')}-s{seed}")
    shutil.rmtree(path, ignore_errors=True)
    r = train_lm(spec, seed, path)
    return {
        "case": name,
        "family": family,
        "seed": seed,
        "kind": kind,
        "path": path,
        "labels": r.labels,
        "onset": r.onset,
        "final_loss": r.final_loss,
    }


def train_classic(job: tuple[str, int, str]) -> dict:
    """A healthy run of the classic families (``families.cases``): where the new rules must stay quiet."""
    from families.cases import CASES
    from families.training import run as train_family

    name, seed, root = job
    kind, family, spec = CASES[name]
    path = os.path.join(root, f"{name.replace('/', '-')}-s{seed}")
    shutil.rmtree(path, ignore_errors=True)
    r = train_family(name, spec, seed, path)
    return {"case": name, "family": family, "seed": seed, "kind": kind, "path": path, "labels": r.labels}


def classic_healthy(seeds: list[int], processes: int, out: str | None = None) -> int:
    """False alarms of the seven new rules on the classic families' runs built healthy (trials kept in
    ``out`` when given)."""
    from families.cases import CASES

    root = out or tempfile.mkdtemp(prefix="tornasole-classic-healthy-")
    jobs = [(n, s, root) for n, (kind, _, _) in CASES.items() if kind == "healthy" for s in seeds]
    start = time.perf_counter()
    with get_context("fork").Pool(processes) as pool:
        runs = pool.map(train_classic, jobs, chunksize=1)
        results = pool.map(evaluate_one, [(r, {"llm": LLM_RULES}) for r in runs], chunksize=1)
    alarms = [(r["case"], r["seed"], _first(r, "llm")) for r in results if _first(r, "llm")]
    print(f"{len(results)} classic runs built healthy; the new rules alarmed on {len(alarms)}:")
    for case, seed, (step, conf) in alarms:
        print(f"  {case}-s{seed}: {conf} at step {step}")
    print(f"total {time.perf_counter() - start:.0f} s ({processes} processes)")
    if out:
        Path(out, "runs.json").write_text(json.dumps(runs))
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def _first(r: dict, set_name: str) -> tuple[int, str] | None:
    fires = sorted(
        (f["first_step"], c) for c, f in r["firings"][set_name].items() if f["first_step"] is not None
    )
    return fires[0] if fires else None


def family_metrics(rs: list[dict], set_name: str) -> dict:
    broken = [r for r in rs if r["labels"]]
    healthy = [r for r in rs if not r["labels"]]
    latencies = [f[0] - r["onset"] for r in broken if (f := _first(r, set_name)) is not None]
    alarms = [r for r in healthy if _first(r, set_name)]
    return {
        "runs": len(rs),
        "broken": len(broken),
        "detected": sum(1 for r in broken if _first(r, set_name)),
        "healthy": len(healthy),
        "false_alarms": len(alarms),
        "median_latency_steps": statistics.median(latencies) if latencies else None,
        "within_one_step": sum(1 for x in latencies if x <= 1) / len(latencies) if latencies else None,
        "false_alarm_cases": sorted(f"{r['case']}-s{r['seed']}:{_first(r, set_name)[1]}" for r in alarms),
        "missed_cases": sorted(f"{r['case']}-s{r['seed']}" for r in broken if not _first(r, set_name)),
        "built_mismatch": sorted(
            f"{r['case']}-s{r['seed']}" for r in rs if (r["kind"] == "broken") != bool(r["labels"])
        ),
    }


def per_rule(results: list[dict], set_name: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for r in results:
        for conf, f in r["firings"][set_name].items():
            row = out.setdefault(conf, {"fired_broken": 0, "fired_healthy": [], "latencies": []})
            if f["first_step"] is None:
                continue
            if r["labels"]:
                row["fired_broken"] += 1
                row["latencies"].append(f["first_step"] - r["onset"])
            else:
                row["fired_healthy"].append(f"{r['case']}-s{r['seed']}")
    return out


def report(results: list[dict], sets: list[str]) -> dict:
    numbers: dict[str, dict] = {}
    for set_name in sets:
        print(f"\n=== {set_name}: per family ===")
        print(f"{'family':8s} {'recall':>14s} {'false alarms':>14s} {'median lat':>11s} {'<=1 step':>9s}")
        per = {}
        for family in sorted({r["family"] for r in results}):
            m = family_metrics([r for r in results if r["family"] == family], set_name)
            per[family] = m
            lat, within = m["median_latency_steps"], m["within_one_step"]
            recall = f"{m['detected']}/{m['broken']} = {m['detected'] / max(m['broken'], 1):.2f}"
            alarms = f"{m['false_alarms']}/{m['healthy']} = {m['false_alarms'] / max(m['healthy'], 1):.2f}"
            lat_text = "-" if lat is None else f"{lat:g}"
            within_text = "-" if within is None else f"{100 * within:.0f}%"
            print(f"{family:8s} {recall:>14s} {alarms:>14s} {lat_text:>11s} {within_text:>9s}")
            for key in ("missed_cases", "false_alarm_cases", "built_mismatch"):
                if m[key]:
                    print(f"  {key}: {', '.join(m[key])}")
        rules = per_rule(results, set_name)
        print("  per rule: fired on labelled-broken runs / healthy runs it fired on / median latency")
        for conf, row in sorted(rules.items()):
            lat = statistics.median(row["latencies"]) if row["latencies"] else None
            print(
                f"    {conf:28s} {row['fired_broken']:3d}  healthy {len(row['fired_healthy'])}"
                f"{' (' + ', '.join(row['fired_healthy']) + ')' if row['fired_healthy'] else ''}"
                f"  latency {'-' if lat is None else f'{lat:g}'}"
            )
        numbers[set_name] = {"families": per, "rules": rules}
    return numbers


def reused_runs(path: str, seeds: list[int], cases: str) -> list[dict]:
    """The runs of a previous ``--json`` output (their firings dropped) among ``seeds`` and ``cases``; every
    trial folder must still exist (a run without ``--out`` removed them)."""
    runs = [
        {k: v for k, v in r.items() if k != "firings"}
        for r in json.loads(Path(path).read_text())["runs"]
        if r["seed"] in seeds and re.search(cases, r["case"])
    ]
    missing = [r["path"] for r in runs if not os.path.isdir(r["path"])]
    if missing:
        raise SystemExit(f"--reuse {path}: {len(missing)} trial folder(s) gone, e.g. {missing[0]}")
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--lofo", action="store_true", help="also score leave-one-family-out over LOFO_GRID")
    ap.add_argument("--cases", default="", help="only the cases whose name matches this regex (re.search)")
    ap.add_argument("--out", help="keep the trials here (default: a temporary folder, removed)")
    ap.add_argument("--json", help="write the numbers and every run's firings here")
    ap.add_argument(
        "--reuse",
        help="re-evaluate the runs of a previous --json output whose trials its --out kept (rules only)",
    )
    ap.add_argument(
        "--classic-healthy", action="store_true", help="instead: the new rules on the classic healthy runs"
    )
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    if args.classic_healthy:
        return classic_healthy(seeds, args.processes, args.out)
    sets = {"llm": LLM_RULES, "recommended": rule_sets()["recommended"]}
    if args.lofo:
        sets["lofo"] = lofo_rules()
    start = time.perf_counter()
    root = args.out or tempfile.mkdtemp(prefix="tornasole-lm-families-")
    jobs = [(n, s, root) for n in LM_CASES if re.search(args.cases, n) for s in seeds]
    with get_context("fork").Pool(args.processes) as pool:
        if args.reuse:
            runs = reused_runs(args.reuse, seeds, args.cases)
        else:
            runs = pool.map(train_one, jobs, chunksize=1)
        trained = time.perf_counter()
        results = pool.map(evaluate_one, [(r, sets) for r in runs], chunksize=1)
    evaluated = time.perf_counter()
    numbers = report(results, [s for s in sets if s != "lofo"])
    if args.lofo:
        numbers["lofo"] = lofo(results)
    print(
        f"\n{len(runs)} runs; training {trained - start:.0f} s, rules {evaluated - trained:.0f} s, "
        f"total {evaluated - start:.0f} s ({args.processes} processes)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"numbers": numbers, "runs": results}, indent=1, default=str))
    if not args.out:
        shutil.rmtree(root, ignore_errors=True)  # with --reuse: the empty folder made above
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

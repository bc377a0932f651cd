"""What InputsNotNormalized reads on saved trials: each run's input scale, by kind, family and case.

For every run of a ``runs.json`` index (``score.py --out DIR`` or ``run.py --out DIR`` writes one), the
scale the rule judges (the ``percentile``-th percentile of the non-zero |x| of the model's own input,
``<ModelClass>_input_0`` or Keras's ``inputs``, over every saved step: what the rule sees at the run's
end), and the step it first fires at under the given parameters. Then, per family and kind, the range.
A run that saved no model input (trials written before the recipes saved it) reads "-"; a non-float
input (the transformer's token ids) reads "int".

    python bench/detection/families/input_scales.py --trials DIR/runs.json [--threshold 40]

Without ``--trials``: the same statistic on the data the families and ``run.py`` generate (no training),
every family at x1 and x100 and every ``run.py`` case, seeds 0-2 (what the data pipeline would feed the
model; the saved trials hold the batches of it the hook saved).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tornasole.rules.builtin.inputs_not_normalized import (  # noqa: E402
    InputsNotNormalized,
    magnitude_histogram,
    magnitude_percentile,
)


def trial_scale(path: str, params: dict[str, str]) -> tuple[str, int | None]:
    """``(scale read at the end, first step the rule fires)`` of the trial at ``path``."""
    from tornasole.trials import create_trial

    trial = create_trial(path, collections_timeout=0.1, poll_interval=0.01)
    rule = InputsNotNormalized(trial, **params)
    fired = None
    steps = trial.steps()
    for step in steps:
        if rule.invoke_at_step(step):
            fired = step
            break
    names = [n for n in trial.tensor_names() if rule.regex.match(n)]
    if not names:
        return "-", fired
    hist = None
    for name in names:
        for step in trial.tensor(name).steps():
            v = trial.tensor(name).value(step)
            if not np.issubdtype(v.dtype, np.floating):
                return "int", fired
            h = magnitude_histogram(v)
            hist = h if hist is None else hist + h
    scale = magnitude_percentile(hist, rule.percentile) if hist is not None else None
    return ("-" if scale is None else f"{scale:.3g}"), fired


def from_trials(index: str, params: dict[str, str]) -> None:
    runs = json.loads(Path(index).read_text())
    ranges: dict[tuple[str, str], list[float]] = defaultdict(list)
    fired_on: list[str] = []
    for run in runs:
        scale, fired = trial_scale(run["path"], params)
        family = run.get("family") or run.get("split", "")
        print(f"{family:18s} {run['case']:44s} s{run['seed']:<4d} {run['kind']:8s} {scale:>6s} fired {fired}")
        if scale not in ("-", "int"):
            ranges[
                (family, run["kind"] + ("/x100" if "inputs_not_normalised" in run["case"] else ""))
            ].append(float(scale))
        if fired is not None:
            fired_on.append(f"{run['case']} s{run['seed']} ({run['kind']}) at step {fired}")
    print()
    for (family, kind), values in sorted(ranges.items()):
        print(f"{family:18s} {kind:16s} {len(values):4d} runs  scale {min(values):.3g}-{max(values):.3g}")
    print(f"\nfired on {len(fired_on)} runs:")
    for line in fired_on:
        print("  " + line)


def _scale(x: np.ndarray, percent: float) -> float:
    return magnitude_percentile(magnitude_histogram(x), percent) or 0.0


def from_data(percent: float) -> None:
    from cases import CASES
    from training import make_data

    from families import data
    from families.training import FAMILIES

    for family, recipe in FAMILIES.items():
        for seed in (0, 1):
            x = getattr(data, recipe.data)(np.random.default_rng(seed))[0]
            if not np.issubdtype(x.dtype, np.floating):
                print(f"families {family:12s} s{seed} int (not judged)")
                continue
            x1, x100 = _scale(x, percent), _scale(x * 100, percent)
            print(f"families {family:12s} s{seed} x1 {x1:.3g}  x100 {x100:.3g}")
    by: dict[tuple[str, float], list[tuple[float, str]]] = defaultdict(list)
    for name, (kind, _split, spec) in CASES.items():
        for seed in (0, 1, 2):
            x = make_data(spec, np.random.default_rng(seed))[0]
            by[(kind, spec.input_scale)].append((_scale(x, percent), name))
    for (kind, scale), values in sorted(by.items()):
        lo, hi = min(v for v, _ in values), max(v for v, _ in values)
        names = sorted({n for _, n in values}) if scale != 1.0 else []
        print(
            f"run.py {kind:8s} input_scale {scale:5g}: {len(values):4d} runs, scale {lo:.3g}-{hi:.3g} {names}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", help="a runs.json index (score.py or run.py --out DIR)")
    ap.add_argument("--threshold", default="40")
    ap.add_argument("--percentile", default="90")
    ap.add_argument("--threshold-samples", default="100")
    args = ap.parse_args()
    params = {
        "threshold": args.threshold,
        "percentile": args.percentile,
        "threshold_samples": args.threshold_samples,
    }
    if args.trials:
        from_trials(args.trials, params)
    else:
        from_data(float(args.percentile))


if __name__ == "__main__":
    main()

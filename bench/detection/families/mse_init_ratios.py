"""First loss / chance level of squared-error runs: the data behind InitialLossTooHigh's squared-error level
and its ``squared_error_factor`` (journal/families.md, "Branch mseinit").

Usage::

    python bench/detection/families/mse_init_ratios.py --trials DIR/runs.json   # saved runs of score.py --out
    python bench/detection/families/mse_init_ratios.py --seeds 200              # untrained models, by init

``--trials``: for every regression and autoencoder run of a ``score.py`` index (``runs.json``), the first
saved TRAIN loss over the two candidate levels read from the target saved with it (``MSELoss_input_1``):
its variance per output averaged over the outputs (predicting the mean) and its mean square (predicting 0).
``--seeds``: the same two ratios at step 0 of untrained models under common initialisations (PyTorch's
default, He on the hidden layers, Glorot and He on every layer, DeepFD's x8), for the benchmark's regression
model (BatchNorm) and a plain ReLU MLP on the diabetes data, one random first batch per seed (``--batch``);
printed: the share of seeds above each factor.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # bench/detection: ``families`` is a package there

FACTORS = (2, 3, 4, 5, 8)


def _levels(targets: np.ndarray) -> tuple[float, float]:
    """(variance per output averaged over the outputs, mean square) of a batch of targets."""
    t = np.asarray(targets, dtype=np.float64).reshape(len(targets), -1)
    return float(t.var(axis=0).mean()), float((t**2).mean())


def from_trials(index: str) -> None:
    from tornasole.modes import TRAIN
    from tornasole.trials import create_trial

    for run in json.loads(Path(index).read_text()):
        if run["family"] not in ("regression", "autoencoder"):
            continue
        trial = create_trial(run["path"])
        loss = "MSELoss_output_0"
        step = next(s for s in trial.tensor(loss).steps() if trial.mode(s) == TRAIN)
        first = float(trial.tensor(loss).value(step))
        variance, mean_square = _levels(trial.tensor("MSELoss_input_1").value(step))
        print(
            f"{run['case']:40s} s{run['seed']} {run['kind']:8s} first loss {first:10.4f}  "
            f"/ variance {first / variance:7.2f}  / mean square {first / mean_square:7.2f}"
        )


def _initialise(model, how: str) -> None:
    import torch
    from torch import nn

    linear = [m for m in model.modules() if isinstance(m, nn.Linear)]
    for i, m in enumerate(linear):
        with torch.no_grad():
            if how == "x8":
                m.weight.mul_(8.0)
            elif how == "glorot":
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
            elif how == "he" or (how == "he_hidden" and i < len(linear) - 1):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.zeros_(m.bias)


def from_seeds(seeds: int, batch: int | None = None) -> None:
    import torch
    from torch import nn

    from families import data
    from families.training import FAMILIES, FamilySpec, build

    torch.set_num_threads(1)
    recipe = FAMILIES["regression"]
    x, y, classes, n_val = data.diabetes(np.random.default_rng(0))
    x, y = torch.tensor(x), torch.tensor(y)
    n_train = len(x) - n_val
    batch = batch or recipe.batch
    for arch in ("batchnorm", "plain"):
        for how in ("default", "he_hidden", "glorot", "he", "x8"):
            ratios = []
            for seed in range(seeds):
                torch.manual_seed(seed)
                if arch == "plain":
                    model = nn.Sequential(
                        nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1)
                    )
                else:
                    model = build(FamilySpec("regression"), recipe, x.shape[1], classes)
                _initialise(model, how)
                model.train()
                idx = torch.randperm(n_train)[:batch]
                with torch.no_grad():
                    first = float(((model(x[idx]).double() - y[idx].double()) ** 2).mean())
                ratios.append([first / level for level in _levels(y[idx].numpy())])
            r = np.array(ratios)
            shares = "  ".join(f">{f}: {np.mean(r[:, 1] > f):5.1%}" for f in FACTORS)
            print(
                f"{arch:9s} {how:9s} / mean square: median {np.median(r[:, 1]):6.2f}  {shares}  "
                f"| / variance: median {np.median(r[:, 0]):6.2f}, max {r[:, 0].max():8.2f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", help="a score.py index (runs.json) whose regression/autoencoder runs to read")
    ap.add_argument("--seeds", type=int, default=0, help="seeds per initialisation of untrained models")
    ap.add_argument("--batch", type=int, help="first batch's size with --seeds (default: the recipe's, 16)")
    args = ap.parse_args()
    if not args.trials and not args.seeds:
        ap.error("give --trials or --seeds")
    if args.trials:
        from_trials(args.trials)
    if args.seeds:
        from_seeds(args.seeds, args.batch)


if __name__ == "__main__":
    main()

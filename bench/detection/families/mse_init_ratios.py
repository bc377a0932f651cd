"""First loss / chance level of squared-error runs: the data behind InitialLossTooHigh's squared-error level
and its two tiers, ``squared_error_factor`` with the weights' scale and ``squared_error_any_factor`` alone
(journal/families.md, "Branch mseinit", "Branch sqgate").

Usage::

    python bench/detection/families/mse_init_ratios.py --trials DIR/runs.json   # saved runs of score.py --out
    python bench/detection/families/mse_init_ratios.py --seeds 200              # untrained models, by init

``--trials``: for every regression, regression_keras and autoencoder run of a ``score.py`` index
(``runs.json``), the first saved TRAIN loss over the two candidate levels read from the target saved with it
(``MSELoss_input_1``; the Keras hook's ``labels``): its variance per output averaged over the outputs
(predicting the mean) and its mean square (predicting 0), and the weights' scale at that step (the median
over the weight tensors of std x sqrt(fan-in), as the rule reads it; fan-in by the hook's layout).
``--seeds``: first loss / mean square at step 0 of untrained models under common initialisations
(PyTorch's default, LeCun, Glorot and Glorot at a ReLU gain, He on the hidden layers, He on every layer,
DeepFD's x8), for the benchmark's regression model (BatchNorm) and a plain ReLU MLP on the diabetes data,
first batches of ``--batches`` (4-64) drawn from one permutation per seed; printed per batch size: the
largest ratio, its 99th percentile, the share of seeds above each factor and the largest weights' scale
(median over a model's tensors; single tensor). ``--target-scale`` multiplies the standardised targets:
the squared error's chance level depends on the targets' units, the outputs of an untrained head do not.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # bench/detection: ``families`` is a package there

FACTORS = (2, 4, 8, 16, 32)


def _levels(targets: np.ndarray) -> tuple[float, float]:
    """(variance per output averaged over the outputs, mean square) of a batch of targets."""
    t = np.asarray(targets, dtype=np.float64).reshape(len(targets), -1)
    return float(t.var(axis=0).mean()), float((t**2).mean())


def from_trials(index: str) -> None:
    from tornasole.modes import TRAIN
    from tornasole.rules.builtin.initial_loss_too_high import EMBEDDING, weight_scale
    from tornasole.trials import create_trial

    embedding = re.compile(EMBEDDING)
    for run in json.loads(Path(index).read_text()):
        if run["family"] not in ("regression", "regression_keras", "autoencoder"):
            continue
        trial = create_trial(run["path"])
        keras = "batch_loss/MeanSquaredError" in trial.tensor_names()
        loss, target = (
            ("batch_loss/MeanSquaredError", "labels") if keras else ("MSELoss_output_0", "MSELoss_input_1")
        )
        step = next(s for s in trial.tensor(loss).steps() if trial.mode(s) == TRAIN)
        first = float(np.mean(trial.tensor(loss).value(step)))
        variance, mean_square = _levels(trial.tensor(target).value(step))
        scales = [
            weight_scale(n, trial.tensor(n).value(step))
            for n in trial.tensor_names(step=step, collection="weights")
            if not embedding.match(n)
        ]
        scale = float(np.median([s for s in scales if s is not None]))
        print(
            f"{run['case']:40s} s{run['seed']} {run['kind']:8s} first loss {first:10.4f}  "
            f"/ variance {first / variance:7.2f}  / mean square {first / mean_square:7.2f}  "
            f"weights' scale (median) {scale:5.2f}"
        )


INITS = ("default", "lecun", "glorot", "glorot_relu", "he_hidden", "he", "x8")
BATCHES = (4, 8, 16, 32, 64)


def _initialise(model, how: str) -> None:
    """Re-initialise ``model``'s ``nn.Linear`` layers: ``default`` keeps PyTorch's; ``lecun`` N(0, 1/fan-in);
    ``glorot`` (Keras's default) and ``glorot_relu`` (its ReLU gain, sqrt 2) uniform; ``he`` normal on every
    layer (a loop over ``nn.Linear``), ``he_hidden`` on all but the output layer; biases zero; ``x8``
    DeepFD's mutant: PyTorch's default weights times 8."""
    import math

    import torch
    from torch import nn

    linear = [m for m in model.modules() if isinstance(m, nn.Linear)]
    for i, m in enumerate(linear):
        with torch.no_grad():
            if how == "x8":
                m.weight.mul_(8.0)
                continue
            if how == "default" or (how == "he_hidden" and i == len(linear) - 1):
                continue
            if how == "lecun":
                nn.init.normal_(m.weight, std=1 / math.sqrt(m.weight.shape[1]))
            elif how in ("glorot", "glorot_relu"):
                nn.init.xavier_uniform_(m.weight, gain=math.sqrt(2) if how == "glorot_relu" else 1.0)
            else:
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            nn.init.zeros_(m.bias)


def _median_scale(model) -> tuple[float, float]:
    """(median, largest) std x sqrt(fan-in) over the model's weights of two or more axes, as
    InitialLossTooHigh's ``weights_scale`` reads them (PyTorch names: fan-in on axis 1)."""
    from tornasole.rules.builtin.initial_loss_too_high import weight_scale

    scales = [weight_scale(n, p.detach().numpy()) for n, p in model.named_parameters()]
    scales = [s for s in scales if s is not None]
    return float(np.median(scales)), float(max(scales))


def _regression_seed(arch: str, how: str, x, y, classes: int, n_train: int, medians: list, singles: list):
    """:func:`families.seed_ratios.first_batch_ratios`'s ``start`` for one model and initialisation: the
    seed's untrained model (its weights' scales appended to ``medians`` and ``singles``) and its first
    squared error / E[t^2] on each first batch of one ``torch.randperm`` of the training rows per seed."""
    import torch
    from torch import nn

    from families.training import FAMILIES, FamilySpec, build

    recipe = FAMILIES["regression"]

    def start(seed: int):
        torch.manual_seed(seed)
        if arch == "plain":
            model = nn.Sequential(
                nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1)
            )
        else:
            model = build(FamilySpec("regression"), recipe, x.shape[1], classes)
        _initialise(model, how)
        median, single = _median_scale(model)
        medians.append(median)
        singles.append(single)
        model.train()
        order = torch.randperm(n_train)

        def ratio(b: int) -> float:
            idx = order[:b]
            with torch.no_grad():
                first = float(((model(x[idx]).double() - y[idx].double()) ** 2).mean())
            return first / _levels(y[idx].numpy())[1]

        return ratio

    return start


def from_seeds(seeds: int, batches: tuple[int, ...], target_scale: float = 1.0, inits=INITS) -> None:
    """Per model, initialisation and first-batch size: the ratio first loss / E[t^2] over ``seeds`` seeds
    (largest, 99th percentile, share above each factor) and the weights' scale (largest median over the
    seeds, largest single tensor). ``target_scale`` multiplies the (standardised) targets."""
    import torch

    from families import data
    from families.seed_ratios import first_batch_ratios

    torch.set_num_threads(1)
    x, y, classes, n_val = data.diabetes(np.random.default_rng(0))
    x, y = torch.tensor(x), torch.tensor(y) * target_scale
    n_train = len(x) - n_val
    largest = {}
    for arch in ("batchnorm", "plain"):
        for how in inits:
            medians, singles = [], []
            ratios = first_batch_ratios(
                seeds, batches, _regression_seed(arch, how, x, y, classes, n_train, medians, singles)
            )
            for b in batches:
                r = ratios[b]
                largest[(arch, how)] = max(largest.get((arch, how), 0.0), float(r.max()))
                shares = " ".join(f">{f}: {np.mean(r > f):5.1%}" for f in FACTORS)
                print(
                    f"{arch:9s} {how:11s} batch {b:2d}: max {r.max():8.2f} p99 {np.quantile(r, 0.99):7.2f} "
                    f"min {r.min():5.2f}  {shares}  | scale: median {min(medians):.2f}-{max(medians):.2f}, "
                    f"tensor <= {max(singles):.2f}",
                    flush=True,
                )
    print(f"largest first loss / E[t^2] over batches {batches} (targets x {target_scale}):")
    for (arch, how), v in largest.items():
        print(f"  {arch:9s} {how:11s} {v:9.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", help="a score.py index (runs.json) whose regression/autoencoder runs to read")
    ap.add_argument("--seeds", type=int, default=0, help="seeds per initialisation of untrained models")
    ap.add_argument(
        "--batches", default="4,8,16,32,64", help="with --seeds: first batches' sizes (comma-separated)"
    )
    ap.add_argument(
        "--target-scale", type=float, default=1.0, help="with --seeds: multiply the standardised targets"
    )
    ap.add_argument(
        "--inits", default=",".join(INITS), help="with --seeds: initialisations (comma-separated)"
    )
    args = ap.parse_args()
    if not args.trials and not args.seeds:
        ap.error("give --trials or --seeds")
    if args.trials:
        from_trials(args.trials)
    if args.seeds:
        batches = tuple(int(b) for b in args.batches.split(","))
        from_seeds(args.seeds, batches, args.target_scale, tuple(args.inits.split(",")))


if __name__ == "__main__":
    main()

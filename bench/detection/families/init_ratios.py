"""First cross-entropy / chance level, and the weights' scale, at initialisation: the data behind
InitialLossTooHigh's two tiers (``factor`` with the weights' scale, ``any_init_factor`` alone)
(journal/families.md, "Branch initguard").

Usage::

    python bench/detection/families/init_ratios.py --trials DIR/runs.json   # saved runs of score.py --out
    python bench/detection/families/init_ratios.py --seeds 100              # untrained models, by init

``--trials``: for every classification run of a ``score.py`` index, the first saved TRAIN loss over ln C
and the weights' scale saved at that step (each weight tensor of two or more axes: its std x sqrt(fan-in);
printed: the largest and the median over the model's tensors), by case.
``--seeds``: the same at step 0 of untrained small classifiers (scikit-learn's iris, wine, digits, breast
cancer; standardised inputs; two ReLU MLPs each) under Keras's default (Glorot uniform) and He normal, and
PyTorch with ``xavier_uniform_`` / ``kaiming_normal_`` on every layer (biases zero), one random first batch
per seed and batch size (8, 16, 32, 64); printed: the largest ratio, its 99th percentile and the share of
seeds above 1.4, 1.6, 1.8, 2, with the largest weight scale. Needs scikit-learn (bench only).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # bench/detection: ``families`` is a package there

BATCHES = (8, 16, 32, 64)
LEVELS = (1.4, 1.6, 1.8, 2.0)


def _scales(weights: dict[str, np.ndarray]) -> list[float]:
    from tornasole.rules.builtin.initial_loss_too_high import weight_scale

    out = [weight_scale(name, value) for name, value in weights.items()]
    return [s for s in out if s is not None]


def from_trials(index: str) -> None:
    from tornasole.modes import TRAIN
    from tornasole.rules.builtin.losses import BINARY_CROSS_ENTROPY, CROSS_ENTROPY
    from tornasole.trials import create_trial

    rows = defaultdict(list)
    with open(index) as f:
        runs = json.load(f)
    for run in runs:
        trial = create_trial(run["path"])
        losses = [n for n in trial.tensor_names() if BINARY_CROSS_ENTROPY.match(n) or CROSS_ENTROPY.match(n)]
        if not losses:
            continue
        name = losses[0]
        steps = trial.tensor(name).steps(mode=TRAIN)
        if not steps:
            continue
        step = trial.tensor(name).steps()[0]
        value = float(np.mean(trial.tensor(name).value(step)))
        if BINARY_CROSS_ENTROPY.match(name):
            classes = 2
        elif "predictions" in trial.tensor_names(step=step):
            classes = trial.tensor("predictions").value(step).shape[-1]
        else:
            grads = [n for n in trial.saved_order(step) if n.startswith("gradient/")]
            classes = trial.tensor(grads[0]).value(step).shape[0]
        weights = {
            n: trial.tensor(n).value(step) for n in trial.tensor_names(step=step, collection="weights")
        }
        scales = _scales(weights)
        rows[run["case"]].append(
            (run["seed"], value / math.log(classes), max(scales, default=float("nan")), np.median(scales))
        )
    for case in sorted(rows):
        cells = "  ".join(f"s{s}: {r:.2f} (w max {m:.2f}, med {d:.2f})" for s, r, m, d in sorted(rows[case]))
        print(f"{case:45s} {cells}")


def _datasets():
    from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
    from sklearn.preprocessing import StandardScaler

    for name, loader, hidden in [
        ("iris3", load_iris, [(16,), (64, 64, 64)]),
        ("wine3", load_wine, [(32, 32), (128,)]),
        ("digits10", load_digits, [(64,), (128, 64, 32)]),
        ("cancer2", load_breast_cancer, [(32, 16), (64, 64, 64)]),
    ]:
        x, y = loader(return_X_y=True)
        yield name, StandardScaler().fit_transform(x).astype("float32"), y, hidden


def _keras_model(inputs: int, hidden: tuple, classes: int, init: str):
    import keras

    layers = [keras.Input((inputs,))]
    layers += [keras.layers.Dense(h, activation="relu", kernel_initializer=init) for h in hidden]
    if classes == 2:
        layers.append(keras.layers.Dense(1, activation="sigmoid", kernel_initializer=init))
    else:
        layers.append(keras.layers.Dense(classes, activation="softmax", kernel_initializer=init))
    model = keras.Sequential(layers)
    return model, {f"weights/{v.path}": v.numpy() for v in model.trainable_weights}


def _torch_model(inputs: int, hidden: tuple, classes: int, init: str):
    import torch
    from torch import nn

    widths = [inputs, *hidden]
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    layers.append(nn.Linear(widths[-1], 1 if classes == 2 else classes))
    model = nn.Sequential(*layers)
    for m in model:
        if isinstance(m, nn.Linear):
            if init == "xavier_uniform":
                nn.init.xavier_uniform_(m.weight)
            else:
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            nn.init.zeros_(m.bias)
    weights = {f"{n}": p.detach().numpy() for n, p in model.named_parameters()}

    def forward(x):
        with torch.no_grad():
            return model(torch.from_numpy(x)).numpy()

    return forward, weights


def _cross_entropy(out: np.ndarray, y: np.ndarray, probabilities: bool) -> float:
    out = out.astype(np.float64)
    if out.shape[-1] == 1:
        p = out[:, 0] if probabilities else 1 / (1 + np.exp(-out[:, 0]))
        p = np.clip(p, 1e-7, 1 - 1e-7)
        return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
    if probabilities:
        logp = np.log(np.clip(out, 1e-7, 1))
    else:
        logp = out - out.max(axis=1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))
    return float(-np.mean(logp[np.arange(len(y)), y]))


def _classifier_seed(framework: str, init: str, x: np.ndarray, y: np.ndarray, hidden: tuple, scales: list):
    """:func:`families.seed_ratios.first_batch_ratios`'s ``start`` for one classifier set-up: the seed's
    untrained model (its largest weights' scale appended to ``scales``) and its first cross-entropy / ln C
    on each first batch of one permutation of the data per seed."""
    classes = len(set(y))

    def start(seed: int):
        if framework == "keras":
            import keras

            keras.utils.set_random_seed(seed)
            model, weights = _keras_model(x.shape[1], hidden, classes, init)

            def forward(batch, model=model):
                return np.asarray(model(batch, training=False))

            probabilities = True
        else:
            import torch

            torch.manual_seed(seed)
            forward, weights = _torch_model(x.shape[1], hidden, classes, init)
            probabilities = False
        scales.append(max(_scales(weights)))
        order = np.random.default_rng(seed).permutation(len(x))

        def ratio(batch: int) -> float:
            sel = order[:batch]
            loss = _cross_entropy(forward(x[sel]), y[sel], probabilities)
            return loss / math.log(classes)

        return ratio

    return start


def from_seeds(seeds: int, frameworks: list[str], inits: list[str] | None = None) -> None:
    from families.seed_ratios import first_batch_ratios

    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    setups = []
    if "keras" in frameworks:
        setups += [("keras", "glorot_uniform"), ("keras", "he_normal")]
    if "torch" in frameworks:
        setups += [("torch", "xavier_uniform"), ("torch", "kaiming_normal")]
    if inits:
        setups = [s for s in setups if s[1] in inits]
    overall = defaultdict(list)
    for name, x, y, hiddens in _datasets():
        for framework, init in setups:
            for hidden in hiddens:
                scales = []
                ratios = first_batch_ratios(
                    seeds, BATCHES, _classifier_seed(framework, init, x, y, hidden, scales)
                )
                for batch in BATCHES:
                    r = ratios[batch]
                    overall[(framework, init, batch)].append(r.max())
                    above = " ".join(f">{lv}: {(r > lv).sum()}" for lv in LEVELS)
                    print(
                        f"{name:9s} {framework:5s} {init:15s} {str(hidden):14s} batch {batch:2d}: "
                        f"max {r.max():.3f} p99 {np.quantile(r, 0.99):.3f} {above} /{len(r)}; "
                        f"weights' scale max {max(scales):.2f}",
                        flush=True,
                    )
    print("largest first-loss ratio over every dataset and model:")
    for key, maxima in sorted(overall.items()):
        print(f"  {key[0]:5s} {key[1]:15s} batch {key[2]:2d}: {max(maxima):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", help="a score.py index (runs.json) whose classification runs to read")
    ap.add_argument("--seeds", type=int, default=0, help="seeds per initialisation of untrained models")
    ap.add_argument("--frameworks", default="keras,torch", help="with --seeds: keras, torch or both")
    ap.add_argument("--inits", help="with --seeds: only these initialisations (comma-separated)")
    args = ap.parse_args()
    if args.trials:
        from_trials(args.trials)
    if args.seeds:
        from_seeds(args.seeds, args.frameworks.split(","), args.inits.split(",") if args.inits else None)


if __name__ == "__main__":
    main()

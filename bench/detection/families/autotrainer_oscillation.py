"""AUTOTRAINER's ``Oscillating_Loss_Case`` re-made in PyTorch, to read how far its training accuracy swings
in standard errors (OscillatingAccuracy's ``noise_z``; journal/families.md, "Branch smallval").

The demo's recipe (``AutoTrainer/demo_case/Oscillating_Loss_Case``: ``config.pkl`` and ``model.h5``):
scikit-learn's ``make_blobs(1000, centers=3, cluster_std=2, random_state=2)``, the first 700 for training;
Dense(50, relu) -> Dense(3, softmax), categorical cross-entropy, SGD 0.01 with momentum 0.9, batch 1. The
demo multiplies the inputs by 100; with PyTorch's default initialisation every unit then dies in the first
epoch, so ``--scale 1`` (the blobs as generated) is the oscillating run read here. Prints each epoch's
training accuracy (every sample's prediction as it trained, as a Keras history holds it) and the paired
swings' two-proportion z statistics::

    python bench/detection/families/autotrainer_oscillation.py --seed 0 --scale 1 --epochs 30
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from sklearn.datasets import make_blobs

from tornasole.rules.builtin.oscillating_accuracy import paired_swings, swing_z

N_TRAIN = 700


def epoch_accuracies(seed: int, scale: float, epochs: int) -> list[float]:
    x, y = make_blobs(n_samples=1000, centers=3, n_features=2, cluster_std=2, random_state=2)
    xt = torch.tensor(x[:N_TRAIN] * scale, dtype=torch.float32)
    yt = torch.tensor(y[:N_TRAIN])
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(2, 50), torch.nn.ReLU(), torch.nn.Linear(50, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    rng = np.random.default_rng(0)
    out = []
    for _ in range(epochs):
        correct = 0
        for i in rng.permutation(N_TRAIN):
            logits = model(xt[i : i + 1])
            correct += int(logits.argmax(1).item() == yt[i].item())
            opt.zero_grad()
            loss_fn(logits, yt[i : i + 1]).backward()
            opt.step()
        out.append(correct / N_TRAIN)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=float, default=1.0, help="input scale (the demo: 100)")
    ap.add_argument("--epochs", type=int, default=30)
    args = ap.parse_args()
    accs = epoch_accuracies(args.seed, args.scale, args.epochs)
    print("epoch accuracy:", " ".join(f"{a:.3f}" for a in accs))
    zs = [round(swing_z(accs[hi], accs[lo], N_TRAIN), 1) for hi, lo in paired_swings(accs, 0.03)]
    print(f"paired swings >= 0.03: {len(zs)} (0.2 x epochs = {0.2 * len(accs):.1f}); z: {zs}")


if __name__ == "__main__":
    main()

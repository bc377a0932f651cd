"""Tensor values or reductions over steps, drawn to a PNG with the steps where rules fired marked.

The library side of ``tornasole plot`` (and of the demo's plot): a tensor
with one element is drawn as its value, a larger one as a reduction
(``reduction``, ``abs_``); NaN/Inf values are marked along the top edge, since
they cannot be drawn as values; values spanning more than four decades (a
diverging run) get a logarithmic axis. Needs matplotlib (the ``plot`` extra).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from tornasole.exceptions import TensorUnavailableForStep, TornasoleError
from tornasole.modes import ModeKeys

__all__ = ["plot_trial", "series"]


def series(trial: Any, name: str, reduction: str = "mean", abs_: bool = False, mode: ModeKeys | None = None):
    """(steps, values) of one tensor: its value when it has one element, else the reduction."""
    tensor = trial.tensor(name)
    steps = tensor.steps(mode=mode) if mode else tensor.steps()
    kwargs = {"mode": mode} if mode else {}
    xs, ys = [], []
    for step in steps:
        try:
            value = np.asarray(tensor.value(step, **kwargs))
            y = (
                value.reshape(-1)[0]
                if value.size == 1
                else tensor.reduction_value(step, reduction, abs=abs_, **kwargs)
            )
        except TensorUnavailableForStep:  # only reductions were saved for this step
            try:
                y = tensor.reduction_value(step, reduction, abs=abs_, **kwargs)
            except TornasoleError:
                continue
        xs.append(trial.global_step(mode, step) if mode else step)
        ys.append(float(np.asarray(y, dtype=np.float64).reshape(-1)[0]))
    return xs, ys


def _scale(ax: Any, ys: list[float], log_y: bool) -> None:
    """Log scale when asked or when the values span more than four decades (a diverging run)."""
    nonzero = [abs(y) for y in ys if y != 0]
    if not nonzero or not (log_y or max(nonzero) / min(nonzero) > 1e4):
        return
    if all(y > 0 for y in ys):
        ax.set_yscale("log")
    else:
        ax.set_yscale("symlog", linthresh=min(nonzero))


def plot_trial(
    trial: Any,
    names: Iterable[str],
    output: str,
    *,
    reduction: str = "mean",
    abs_: bool = False,
    mode: ModeKeys | None = None,
    fired: Mapping[str, list[int]] | None = None,
    log_y: bool = False,
    title: str | None = None,
) -> int:
    """Write a PNG with one line per tensor; ``fired`` maps rule name -> global steps to mark."""
    from tornasole.extras import require

    require("plot", "plotting")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = [(name, *series(trial, name, reduction, abs_, mode)) for name in names]
    data = [d for d in data if d[1]]
    if not data:
        raise ValueError(f"{trial.path}: nothing to plot for {list(names)}")
    fig, axes = plt.subplots(len(data), 1, figsize=(10, 2.6 * len(data) + 0.8), sharex=True, squeeze=False)
    colors = ["red", "darkorange", "purple", "brown", "magenta"]
    for ax, (name, xs, ys) in zip(axes[:, 0], data):
        finite = [(x, y) for x, y in zip(xs, ys) if math.isfinite(y)]
        bad = [x for x, y in zip(xs, ys) if not math.isfinite(y)]
        if finite:
            ax.plot(*zip(*finite), marker=".", label=name)
        if bad:  # NaN / Inf cannot be drawn as values: mark them along the top edge
            ax.scatter(
                bad,
                [0.95] * len(bad),
                marker="x",
                color="red",
                transform=ax.get_xaxis_transform(),
                label=f"{name}: NaN/Inf",
                zorder=3,
            )
        for i, (rule, steps) in enumerate(sorted((fired or {}).items())):
            for j, step in enumerate(sorted(steps)):
                label = f"{rule} fired" if j == 0 else None
                ax.axvline(step, color=colors[i % len(colors)], alpha=0.4, linestyle="--", label=label)
        _scale(ax, [y for _, y in finite], log_y)
        ax.set_ylabel(f"value or {'|x| ' if abs_ else ''}{reduction}", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="best")
    axes[-1, 0].set_xlabel("global step")
    fig.suptitle(title or f"{trial.name}")
    fig.tight_layout()
    fig.savefig(output, dpi=100)
    plt.close(fig)
    return len(data)

"""What the report shows of a trial's tensors: loss curves by mode and per-layer norms over steps.

Bounded for long jobs: a loss is read in one batch (``Tensor.values``: each event file once), but at
most ``MAX_LOSS_POINTS`` of its steps, evenly spaced with the last kept; a layer's norm is read at most
at ``MAX_NORM_STEPS`` steps, for at most ``MAX_LAYERS`` layers per collection (the report says how many
were left out). A tensor that cannot be read at a step is skipped there (the rules say why, not the
report).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tornasole.exceptions import TornasoleError
from tornasole.modes import ModeKeys

__all__ = ["MAX_LAYERS", "MAX_LOSS_POINTS", "MAX_NORM_STEPS", "DebuggerData", "Series", "load_debugger_data"]

log = logging.getLogger(__name__)

MAX_LOSS_POINTS = 4000
MAX_NORM_STEPS = 200
MAX_LAYERS = 16
#: Collections whose tensors get a norm-over-steps chart, in the order shown.
LAYER_COLLECTIONS = ("weights", "gradients")
_LOSS_MODES = (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL)


@dataclass(frozen=True)
class Series:
    """A named series over global steps."""

    label: str
    steps: tuple[int, ...]
    values: tuple[float, ...]


@dataclass
class DebuggerData:
    trial_path: str
    steps: int = 0
    first_step: int | None = None
    last_step: int | None = None
    workers: list[str] = field(default_factory=list)
    training_ended: bool = False
    losses: list[Series] = field(default_factory=list)
    #: collection -> one L2-norm series per layer
    norms: dict[str, list[Series]] = field(default_factory=dict)
    layers_left_out: dict[str, int] = field(default_factory=dict)


def evenly(items: list[int], limit: int) -> list[int]:
    """At most ``limit`` of ``items``, evenly spaced, first and last kept.

    >>> evenly(list(range(10)), 4)
    [0, 3, 6, 9]
    """
    if len(items) <= limit:
        return list(items)
    if limit <= 1:
        return items[-1:]
    idx = sorted({round(i * (len(items) - 1) / (limit - 1)) for i in range(limit)})
    return [items[i] for i in idx]


def _scalar(value: Any) -> float | None:
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if arr.size == 0:
        return None
    return float(arr[0]) if arr.size == 1 else float(arr.mean())


def _loss_series(trial: Any, name: str) -> list[Series]:
    tensor = trial.tensor(name)
    out = []
    for mode in _LOSS_MODES:
        try:
            mode_steps = tensor.steps(mode=mode)
        except TornasoleError:
            continue
        if not mode_steps:
            continue
        if mode is ModeKeys.GLOBAL and out:  # already drawn by mode
            break
        chosen = evenly(mode_steps, MAX_LOSS_POINTS)
        xs, ys = [], []
        values = None
        if mode is ModeKeys.GLOBAL and len(chosen) == len(mode_steps):
            try:
                values = tensor.values()
            except TornasoleError:
                values = None
        for s in chosen:
            try:
                raw = values[s] if values is not None else tensor.value(s, mode=mode)
                y = _scalar(raw)
            except (TornasoleError, KeyError):
                continue
            g = s if mode is ModeKeys.GLOBAL else trial.global_step(mode, s)
            if y is not None and g is not None:
                xs.append(int(g))
                ys.append(y)
        if xs:
            suffix = "" if mode is ModeKeys.GLOBAL else f" ({mode.name.lower()})"
            out.append(Series(name + suffix, tuple(xs), tuple(ys)))
    return out


def _norm_series(trial: Any, name: str) -> Series | None:
    tensor = trial.tensor(name)
    xs, ys = [], []
    for s in evenly(tensor.steps(), MAX_NORM_STEPS):
        try:
            y = float(np.asarray(tensor.reduction_value(s, "l2"), dtype=np.float64).reshape(-1)[0])
        except TornasoleError:
            continue
        xs.append(int(s))  # NaN/Inf kept: the chart leaves them out, the table shows them
        ys.append(y)
    return Series(name, tuple(xs), tuple(ys)) if xs else None


def load_debugger_data(trial: Any) -> DebuggerData:
    """Losses (the ``losses`` collection) and layer norms (``weights``, ``gradients``) of an open trial."""
    steps = trial.steps()
    data = DebuggerData(
        trial_path=str(trial.path),
        steps=len(steps),
        first_step=steps[0] if steps else None,
        last_step=steps[-1] if steps else None,
        workers=list(trial.workers()),
        training_ended=bool(trial.training_ended()),
    )
    if not steps:
        return data
    for name in sorted(trial.tensor_names(collection="losses")):
        data.losses.extend(_loss_series(trial, name))
    for coll in LAYER_COLLECTIONS:
        names = sorted(trial.tensor_names(collection=coll))
        if not names:
            continue
        chosen = names[:MAX_LAYERS]
        data.layers_left_out[coll] = len(names) - len(chosen)
        data.norms[coll] = [s for s in (_norm_series(trial, n) for n in chosen) if s is not None]
    return data

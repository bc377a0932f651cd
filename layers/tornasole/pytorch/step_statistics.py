"""One optimizer step's statistics: what statistics mode gathers between two step boundaries.

The hook calls :meth:`StepStatistics.collect` when the optimizer is about to
step (the gradients are the accumulated ones the update uses, the weights those
the step's forward passes used) and :meth:`StepStatistics.assemble` at the step
boundary, which returns the step's values as **one** flat device tensor with the
tag of each element. Losses and activations arrive in between (eager forward
passes only) and stay on the device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from tornasole.core import llm_signals as signals
from tornasole.core.llm_signals import SCALAR_PREFIX, learning_rate_name
from tornasole.format.reductions import reduction_tag
from tornasole.pytorch.statistics import (
    StatisticsConfig,
    TensorStatistics,
    gather_parts,
    merge_parts,
    split_sharded,
)

__all__ = [
    "StepStatistics",
    "GRAD_NORM",
    "PARAM_NORM",
    "LOSS_SCALE",
    "SKIPPED_STEP",
    "SKIPPED_STEPS",
    "learning_rate_name",
]

# The names the rules for today's failures read (tornasole.core.llm_signals), as save_scalar spells them.
GRAD_NORM = SCALAR_PREFIX + signals.GRAD_NORM_TOTAL  # L2 norm of all gradients together (the clipping norm)
PARAM_NORM = SCALAR_PREFIX + signals.PARAM_NORM_TOTAL  # L2 norm of all parameters together
LOSS_SCALE = SCALAR_PREFIX + signals.LOSS_SCALE  # a registered GradScaler's scale at this step
SKIPPED_STEP = SCALAR_PREFIX + signals.SKIPPED_STEP  # 1 where the GradScaler skipped this step, else 0
SKIPPED_STEPS = "scalar/skipped_steps"  # optimizer steps the GradScaler skipped so far (inf/NaN gradients)


class StepStatistics:
    """Accumulates a step's statistics on the device (see the module docstring)."""

    def __init__(self, config: StatisticsConfig) -> None:
        self.config = config
        stats = config.statistics
        if config.total_norms and "norm" not in stats:
            stats = (*stats, "norm")  # the totals are merged from the per-tensor norms
        self._reducer = TensorStatistics(stats)
        self._norm_col = self._reducer.statistics.index("norm") if "norm" in self._reducer.statistics else -1
        self._written = len(config.statistics)  # columns written per tensor (an added norm is not)
        self._losses: dict[str, list[Any]] = {}
        self._activations: dict[str, torch.Tensor] = {}
        # (names, statistics, totals): a CPU step's statistics and totals in one numpy array (each total
        # ``(tag, None)``), else a [tensors, statistics] tensor and each total ``(tag, 0-d tensor)``
        self._collected: tuple[list[str], Any, list[tuple[str, torch.Tensor | None]]] | None = None
        self._scaler_values: dict[str, torch.Tensor] = {}
        self._skipped_total: torch.Tensor | None = None
        self._tags: tuple[tuple[str, ...], list[str]] | None = None

    # -- between boundaries ------------------------------------------------------------------
    def observe_loss(self, name: str, value: torch.Tensor) -> None:
        """A micro-batch's loss (a 1-element tensor); the step saves the mean of them.

        A CPU loss is read at once (free there; summed as a Python float); on a device it stays there,
        summed in float32, until the step's one copy.
        """
        v = value.detach()
        v = float(v) if v.is_cpu and not v.is_complex() else v.reshape(()).float()
        acc = self._losses.get(name)
        if acc is None:
            self._losses[name] = [v, 1]
        else:
            acc[0] = acc[0] + v
            acc[1] += 1

    def observe_activation(self, name: str, value: torch.Tensor) -> None:
        """A module output of an eager forward pass (the last micro-batch's is saved)."""
        if value.numel() and value.is_floating_point():
            self._activations[name] = self._reducer.parts([value])

    @property
    def collected(self) -> bool:
        return self._collected is not None

    def collect(self, params: Sequence[tuple[str, torch.Tensor]]) -> None:
        """Reduce the weights and gradients now (the optimizer's pre-step, or a skipped step's end)."""
        cfg = self.config
        named: list[tuple[str, torch.Tensor]] = []
        n_weights = 0
        if cfg.weights:
            named += [(name, p) for name, p in params]
            n_weights = len(named)
        if cfg.gradients:
            named += [("gradient/" + name, p.grad) for name, p in params if p.grad is not None]
        names = [n for n, _ in named]
        tensors = [t for _, t in named]
        k = len(tensors)
        totals: list[tuple[str, tuple[int, int]]] = []  # each total norm's tag and its rows
        if cfg.total_norms:
            if k > n_weights:
                totals.append((GRAD_NORM, (n_weights, k)))
            if n_weights:
                totals.append((PARAM_NORM, (0, n_weights)))
        if not self._activations:
            # a CPU step: one call of the compiled loop gives the statistics and the totals, as numpy
            flat = self._reducer.cpu_statistics(tensors, self._written, [rows for _, rows in totals])
            if flat is not None:
                self._collected = (names, flat, [(tag, None) for tag, _ in totals])
                return
        parts = self._parts(tensors)
        if self._activations:
            names += list(self._activations)
            acts = torch.cat(list(self._activations.values()))
            parts = acts if parts is None else torch.cat([parts, acts.to(parts.device)])
            self._activations = {}
        if parts is None:
            self._collected = ([], torch.zeros(0), [])
            return
        stats = self._reducer.finish(parts)
        norms = stats[:, self._norm_col] if totals else None
        self._collected = (
            names,
            stats[:, : self._written],
            [(tag, torch.linalg.vector_norm(norms[start:stop])) for tag, (start, stop) in totals],
        )

    def _parts(self, tensors: list[torch.Tensor]) -> torch.Tensor | None:
        if not tensors:
            return None
        plain, sharded, group = split_sharded(tensors)
        by_device: dict[Any, list[int]] = {}
        for i in plain:
            by_device.setdefault(tensors[i].device, []).append(i)
        pieces: list[tuple[list[int], torch.Tensor]] = [
            (idx, self._reducer.parts([tensors[i] for i in idx])) for idx in by_device.values()
        ]
        if sharded:
            local = self._reducer.parts([tensors[i] for i in sharded])
            pieces.append((sharded, merge_parts(gather_parts(local, group))))
        if len(pieces) == 1 and pieces[0][0] == list(range(len(tensors))):
            return pieces[0][1]
        device = pieces[0][1].device
        out = torch.empty((len(tensors), pieces[0][1].shape[1]), dtype=torch.float32, device=device)
        for idx, part in pieces:
            out[torch.tensor(idx, device=device)] = part.to(device, non_blocking=True)
        return out

    def observe_scaler(self, scaler: Any) -> None:
        """Before ``GradScaler.update``: the scale this step used and whether it skipped (no sync)."""
        scale = getattr(scaler, "_scale", None)
        if scale is None or not scaler.is_enabled():
            return
        found = [
            v
            for state in scaler._per_optimizer_states.values()
            for v in state["found_inf_per_device"].values()
        ]
        skipped = (
            (torch.stack([f.to(scale.device).float() for f in found]).sum() > 0).float()
            if found
            else torch.zeros((), device=scale.device)
        )
        total = skipped if self._skipped_total is None else self._skipped_total + skipped
        self._skipped_total = total
        self._scaler_values = {
            LOSS_SCALE: scale.detach().reshape(()).float().clone(),
            SKIPPED_STEP: skipped,
            SKIPPED_STEPS: total,
        }

    def _tags_of(self, names: list[str]) -> list[str]:
        """The reduction tags of ``names`` (the same list every step: worked out once)."""
        key = tuple(names)
        if self._tags is None or self._tags[0] != key:
            reds = self.config.reductions
            self._tags = (key, [reduction_tag(name, red, abs_) for name in names for red, abs_ in reds])
        return self._tags[1]

    # -- at the boundary -------------------------------------------------------------------
    def assemble(
        self, scalars: Sequence[tuple[str, Any]] = ()
    ) -> tuple[np.ndarray | torch.Tensor | None, list[str], dict[str, list[str]]]:
        """The step's values as one flat float32 array, its tags, and the tensor names by kind.

        ``scalars`` are more ``(tag, value)`` of the step (the hook's learning rates: floats or
        1-element tensors), put last. The values are one numpy array where all of them are on the host
        (a CPU step: no torch operation), else one tensor on their device (the hook copies it once).
        Kinds: ``tensors`` (reduced), ``losses``, ``scalars``; the hook files the names into collections.
        """
        head: np.ndarray | torch.Tensor | None = None  # the per-tensor statistics (and a CPU step's totals)
        values: list[Any] = []  # the step's scalars: floats and 1-element tensors
        tags: list[str] = []
        kinds: dict[str, list[str]] = {"tensors": [], "losses": [], "scalars": []}
        if self._collected is not None:
            names, stats, totals = self._collected
            if names:
                if isinstance(stats, torch.Tensor):
                    stats = stats.reshape(-1)
                    if stats.is_cpu:
                        stats = stats.numpy()
                head = stats
                tags += self._tags_of(names)
                kinds["tensors"] += names
            for tag, total in totals:
                if total is not None:  # else the total follows the statistics in their numpy array
                    values.append(total)
                tags.append(tag)
                kinds["scalars"].append(tag)
        if self.config.loss:
            for name, (total, count) in self._losses.items():
                values.append(total / count)
                tags.append(name)
                kinds["losses"].append(name)
        more = [*self._scaler_values.items(), *scalars] if self.config.loss_scale else scalars
        for tag, value in more:
            values.append(value)
            tags.append(tag)
            kinds["scalars"].append(tag)
        self._collected = None
        self._losses = {}
        self._scaler_values = {}
        if head is None and not values:
            return None, [], kinds
        return _flat(head, values), tags, kinds

    def reset(self) -> None:
        """Forget what a step that is not saved gathered."""
        self._collected = None
        self._losses = {}
        self._activations = {}
        self._scaler_values = {}


def _flat(head: np.ndarray | torch.Tensor | None, scalars: list[Any]) -> np.ndarray | torch.Tensor:
    """``head`` (many values) then ``scalars`` (floats, 1-element tensors) in one float32 array: numpy
    where everything is on the host, else a tensor on the first device that holds a value."""
    device = head.device if isinstance(head, torch.Tensor) else None
    if device is None:
        device = next((v.device for v in scalars if isinstance(v, torch.Tensor) and not v.is_cpu), None)
    if device is None:
        n = 0 if head is None else head.size
        out = np.empty(n + len(scalars), dtype=np.float32)
        if n:
            out[:n] = head
        out[n:] = [float(v) for v in scalars]
        return out
    pieces = (
        [] if head is None else [torch.from_numpy(head).to(device) if isinstance(head, np.ndarray) else head]
    )
    pieces += [
        v.reshape(1).to(device, non_blocking=True).float()
        if isinstance(v, torch.Tensor)
        else torch.full((1,), float(v), dtype=torch.float32, device=device)  # a fill kernel: no copy, no sync
        for v in scalars
    ]
    return torch.cat(pieces)

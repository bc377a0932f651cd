"""Statistics mode: per-tensor scalar statistics of a PyTorch model at every step, computed on its device.

Full tensors cost a device-to-host copy each (the bf16 gradients of a 7B model
are 14 GB); a handful of statistics per tensor cost a few hundred scalars. So
each step the hook reduces every watched tensor *where it lives* (on CUDA a few
kernels per tensor, norms batched with ``torch._foreach_norm``; on a CPU one
pass of a compiled loop, :mod:`tornasole.pytorch.fused_reductions`), stacks the
results and the step's scalars (loss, learning rate, loss scale, skipped
steps, total norms) into **one** device tensor and copies that once (on CUDA
``non_blocking`` into pinned memory; the writer thread waits on one event).

Each statistic is written as an smdebug reduction record
(``smdebug/reductions/[abs_]<name>/<tensor>``, FORMAT.md 2.4), so the rules and
smdebug's own ``Trial`` read them with ``reduction_value``:

=================  ========================  ======================================================
statistic          reduction written         meaning
=================  ========================  ======================================================
``norm``           ``l2``                    L2 norm of the flattened tensor
``max_abs``        ``abs_max``               largest absolute value; also the ``amax`` of low-
                                             precision (fp8/fp16) scaling, which is the same number
``mean``           ``mean``
``std``            ``std``                   unbiased, as smdebug's PyTorch hook (``torch.std``)
``min``/``max``    ``min``/``max``
``zero_fraction``  ``zero_fraction``         fraction of exact zeros (Tornasole's name)
``nonfinite_count`` ``nonfinite_count``      number of NaN and +-Inf elements (Tornasole's name)
=================  ========================  ======================================================

Everything is computed in float32 (16-bit tensors are upcast one at a time), so
the values of a bf16/fp16 run are exact reductions of the values training saw.

Sharded parameters (FSDP2's ``DTensor``): each rank reduces its shard into
mergeable parts (count, mean, sum of squared deviations, norm, min, max, zero and
non-finite counts), the parts are all-gathered once per step over the
parameter's mesh and merged (Chan et al.'s pairwise variance), so every rank
writes the statistics of the *whole* parameter.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from tornasole.exceptions import ConfigurationError
from tornasole.pytorch.fused_reductions import COLUMNS as FUSED_COLUMNS
from tornasole.pytorch.fused_reductions import STATISTIC_CODES, FusedReducer
from tornasole.pytorch.fused_reductions import load as load_fused_reducer

__all__ = ["StatisticsConfig", "STATISTICS", "statistic_reduction", "TensorStatistics", "llm_preset"]

#: statistic -> (reduction name, abs) as written (see the module docstring)
STATISTICS: dict[str, tuple[str, bool]] = {
    "norm": ("l2", False),
    "max_abs": ("max", True),
    "mean": ("mean", False),
    "std": ("std", False),
    "min": ("min", False),
    "max": ("max", False),
    "zero_fraction": ("zero_fraction", False),
    "nonfinite_count": ("nonfinite_count", False),
}
_ALIASES = {"amax": "max_abs", "l2": "norm", "l2_norm": "norm"}
DEFAULT_STATISTICS = ("norm", "max_abs", "mean", "std", "zero_fraction", "nonfinite_count")

# the mergeable parts a tensor is reduced to (the per-step table's columns, as the fused CPU loop writes them)
_N, _MEAN, _M2, _NORM, _MIN, _MAX, _ZEROS, _NONFINITE = (
    FUSED_COLUMNS.index(c) for c in ("count", "mean", "m2", "norm", "min", "max", "zeros", "nonfinite")
)
_PARTS = len(FUSED_COLUMNS)
_NEEDS = {
    "norm": (_NORM,),
    "max_abs": (_MIN, _MAX),
    "mean": (_N, _MEAN),
    "std": (_N, _MEAN, _M2),
    "min": (_MIN,),
    "max": (_MAX,),
    "zero_fraction": (_N, _ZEROS),
    "nonfinite_count": (_NONFINITE,),
}


def statistic_reduction(name: str) -> tuple[str, bool]:
    """The ``(reduction, abs)`` a statistic is written as (``"amax"`` -> ``("max", True)``)."""
    canon = _ALIASES.get(name, name)
    if canon not in STATISTICS:
        raise ConfigurationError(
            f"StatisticsConfig: unknown statistic {name!r}; expected one of {', '.join(STATISTICS)} (or amax)"
        )
    return STATISTICS[canon]


@dataclass(frozen=True)
class StatisticsConfig:
    """What statistics mode saves, and how often (default: every step).

    Parameters
    ----------
    statistics : sequence of str
        Per-tensor statistics (keys of :data:`STATISTICS`; ``amax`` is ``max_abs``).
    weights, gradients, activations : bool
        Which tensors: parameters, their gradients (after accumulation, as the
        optimizer sees them), module outputs (opt-in; eager forward passes only:
        a ``torch.compile``d region is not looked into).
    loss, learning_rate, loss_scale, total_norms : bool
        The step's scalars: the registered loss (mean over the step's
        micro-batches), each param group's learning rate, a registered
        ``GradScaler``'s scale and skipped steps, the global gradient and
        parameter norms.
    save_interval : int
        Every how many optimizer steps (1: every step). Full tensors keep the hook's ``save_config``.
    """

    statistics: tuple[str, ...] = DEFAULT_STATISTICS
    weights: bool = True
    gradients: bool = True
    activations: bool = False
    loss: bool = True
    learning_rate: bool = True
    loss_scale: bool = True
    total_norms: bool = True
    save_interval: int = 1
    reductions: tuple[tuple[str, bool], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        stats = (self.statistics,) if isinstance(self.statistics, str) else tuple(self.statistics)
        canon = tuple(dict.fromkeys(_ALIASES.get(s, s) for s in stats))
        reductions = tuple(statistic_reduction(s) for s in canon)
        if not canon:
            raise ConfigurationError("StatisticsConfig: statistics is empty; name at least one")
        if not isinstance(self.save_interval, int) or isinstance(self.save_interval, bool):
            raise ConfigurationError(f"StatisticsConfig: save_interval={self.save_interval!r} is not an int")
        if self.save_interval < 1:
            raise ConfigurationError(f"StatisticsConfig: save_interval={self.save_interval} must be >= 1")
        object.__setattr__(self, "statistics", canon)
        object.__setattr__(self, "reductions", reductions)

    @classmethod
    def parse(cls, value: Any) -> StatisticsConfig | None:
        """``None``/``False``: off; ``True``: the defaults; a config; or a dict of its fields."""
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            try:
                return cls(**value)
            except TypeError as exc:
                raise ConfigurationError(f"StatisticsConfig: {exc}") from exc
        raise ConfigurationError(f"Hook(statistics={value!r}): expected a StatisticsConfig, a dict or a bool")


def llm_preset() -> StatisticsConfig:
    """What Megatron-LM and OLMo-core log by default (docs/API.md cites where each is logged).

    The loss, the learning rate, the loss scale (fp16), the total gradient and
    parameter norms, and each parameter's and gradient's L2 norm; every step.
    """
    return StatisticsConfig(statistics=("norm",), weights=True, gradients=True, total_norms=True)


class TensorStatistics:
    """Reduces lists of tensors to a ``[len, len(statistics)]`` float32 table on their device.

    On a CPU the weights and gradients are read once each by a compiled loop
    (:mod:`tornasole.pytorch.fused_reductions`) where it could be built; ``fused=None`` (or a failed
    build) keeps PyTorch's reductions, which give the same values.
    """

    def __init__(self, statistics: Sequence[str], fused: FusedReducer | None | str = "auto") -> None:
        self.statistics = tuple(statistics)
        self._fused = fused
        needs = {p for s in self.statistics for p in _NEEDS[s]}
        self._norm = _NORM in needs
        self._moments = _MEAN in needs or _M2 in needs
        self._minmax = _MIN in needs or _MAX in needs
        self._zeros = _ZEROS in needs
        self._nonfinite = _NONFINITE in needs
        self._counts: dict[tuple[Any, tuple[int, ...]], torch.Tensor] = {}
        self._codes = tuple(STATISTIC_CODES.index(s) for s in self.statistics)

    def parts(self, tensors: Sequence[torch.Tensor]) -> torch.Tensor:
        """The mergeable parts of each (local) tensor: ``[len(tensors), 8]`` float32 on their device."""
        device = tensors[0].device
        if device.type == "cpu" and self._fused_reducer() is not None:
            fused = self._cpu_fused_parts(tensors)
            if fused is not None:
                return fused
        xs = [_as_float(t) for t in tensors]
        k = len(xs)
        sizes = tuple(x.numel() for x in xs)
        counts = self._counts.get((device, sizes))
        if counts is None:  # the same tensors every step: copied to the device once, not per step
            counts = self._counts[(device, sizes)] = torch.tensor([float(n) for n in sizes], device=device)
        zeros = torch.zeros(k, dtype=torch.float32, device=device)
        cols = [zeros] * _PARTS
        cols[_N] = counts
        nonempty = [i for i, x in enumerate(xs) if x.numel()]
        full = [xs[i] for i in nonempty]
        if not full:
            return torch.stack(cols, dim=1)

        def column(values: list[torch.Tensor], fill: float = 0.0) -> torch.Tensor:
            if len(full) == k:
                return torch.stack(values).float()
            col = torch.full((k,), fill, dtype=torch.float32, device=device)
            col[nonempty] = torch.stack(values).float()
            return col

        norms = None
        if self._norm or (self._moments and device.type == "cpu"):
            norms = column(list(torch._foreach_norm(full, 2)))
            cols[_NORM] = norms
        if self._moments:
            if device.type == "cpu":
                cols[_MEAN], cols[_M2] = _cpu_moments(full, nonempty, counts, norms)
            else:  # one kernel a tensor, no host sync
                var_means = [torch.var_mean(x, correction=0) for x in full]
                cols[_MEAN] = column([m for _, m in var_means])
                cols[_M2] = column([v for v, _ in var_means]) * counts
        if self._minmax:
            minmax = [torch.aminmax(x) for x in full]
            cols[_MIN] = column([lo for lo, _ in minmax], float("inf"))  # empty shards are neutral
            cols[_MAX] = column([hi for _, hi in minmax], float("-inf"))
        if self._zeros:
            cols[_ZEROS] = counts - column([torch.count_nonzero(x) for x in full])
        if self._nonfinite:
            if device.type == "cpu" and self._norm:
                # a tensor whose norm is finite has no NaN or Inf: count only the others (a CPU syncs free;
                # a healthy step costs one check, not a value per tensor)
                finite = torch.isfinite(cols[_NORM])
                if not bool(finite.all()):
                    cols[_NONFINITE] = zeros.clone()
                    for i in (~finite).nonzero().flatten().tolist():
                        x = xs[i]
                        cols[_NONFINITE][i] = float(x.numel() - int(torch.isfinite(x).sum()))
            else:
                cols[_NONFINITE] = counts - column([torch.isfinite(x).sum() for x in full])
        return torch.stack(cols, dim=1)

    def cpu_statistics(
        self, tensors: Sequence[torch.Tensor], columns: int, totals: Sequence[tuple[int, int]] = ()
    ) -> np.ndarray | None:
        """A CPU step's statistics and total norms from one call of the compiled loop, or ``None``.

        ``[len(tensors) * columns + len(totals)]`` float32: the first ``columns`` of
        :attr:`statistics` of each tensor in turn (what :meth:`finish` of :meth:`parts` gives), then the
        L2 norm of the norms of each ``(start, stop)`` range of ``tensors``. ``None`` where this path
        does not apply: no compiled loop, a tensor that is not a plain CPU tensor (on a device, a
        sharded ``DTensor``), or a NaN or Inf in a tensor (PyTorch's reductions keep its propagation):
        the caller then takes :meth:`parts` and :meth:`finish`. A step of the same tensors costs a few
        attribute reads per tensor and one call: no torch operation.
        """
        fused = self._fused_reducer()
        if fused is None or not tensors:
            return None
        pointers, sizes, converted = [], [], []
        f32 = torch.float32
        for t in tensors:
            if type(t) not in _PLAIN or not t.is_cpu:
                return None
            if t.dtype is not f32 or not t.is_contiguous():
                t = _flat_float(t)
                converted.append(t)  # alive until the call returns
            pointers.append(t.data_ptr())
            sizes.append(t.numel())
        return fused.statistics(pointers, sizes, self._codes[:columns], totals)

    def _fused_reducer(self) -> FusedReducer | None:
        if isinstance(self._fused, str):
            self._fused = load_fused_reducer()
        return self._fused

    def _cpu_fused_parts(self, tensors: Sequence[torch.Tensor]) -> torch.Tensor | None:
        """The parts from one pass over each tensor; ``None`` where one holds a NaN or an Inf.

        That step (an unhealthy one, rare) is reduced by PyTorch, whose NaN propagation the
        statistics keep; a tensor that is not a contiguous float32 one is converted first.
        """
        assert isinstance(self._fused, FusedReducer)
        xs = [
            t if type(t) in _PLAIN and t.dtype == torch.float32 and t.is_contiguous() else _flat_float(t)
            for t in tensors
        ]
        return self._fused.reduce(xs)  # [k, 8]: the parts, in this module's column order

    def finish(self, parts: torch.Tensor) -> torch.Tensor:
        """The statistics (columns in :attr:`statistics` order) of merged parts ``[k, 8]``.

        On a CPU, where the compiled loop is built, one call of it (the same float32 formulas, NaN
        included, with a correctly rounded sqrt where PyTorch's vectorised one can be 1 ulp off);
        elsewhere a few torch operations on the table.
        """
        if parts.device.type == "cpu" and parts.dtype == torch.float32 and self._fused_reducer() is not None:
            assert isinstance(self._fused, FusedReducer)
            stats, _ = self._fused.finish(parts.detach().numpy(), self._codes)
            return torch.from_numpy(stats)
        n = parts[:, _N]
        out = []
        for s in self.statistics:
            if s == "norm":
                out.append(parts[:, _NORM])
            elif s == "mean":
                out.append(parts[:, _MEAN])
            elif s == "std":
                out.append(torch.sqrt(parts[:, _M2] / (n - 1)))
            elif s == "min":
                out.append(parts[:, _MIN])
            elif s == "max":
                out.append(parts[:, _MAX])
            elif s == "max_abs":
                out.append(torch.maximum(parts[:, _MIN].abs(), parts[:, _MAX].abs()))
            elif s == "zero_fraction":
                out.append(parts[:, _ZEROS] / n)
            else:  # nonfinite_count
                out.append(parts[:, _NONFINITE])
        return torch.stack(out, dim=1)


def _cpu_moments(
    full: list[torch.Tensor], nonempty: list[int], counts: torch.Tensor, norms: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Means and sums of squared deviations on a CPU, in about one pass over each tensor.

    ``var_mean``'s Welford loop is several times slower on a CPU than a sum. The
    sum of squared deviations is ``norm**2 - n * mean**2`` (in float64) where the
    mean carries under 1 % of the tensor's energy, so the subtraction loses at
    most two digits of float32's seven; for the others (a LayerNorm's weights
    near 1) it is computed exactly, as the norm of the centred values.
    """
    k = counts.shape[0]
    idx = torch.tensor(nonempty, dtype=torch.long)
    sums = torch.zeros(k, dtype=torch.float64)
    sums[idx] = torch.stack([x.sum() for x in full]).double()  # pairwise summation: float32 is exact enough
    n = counts.double()
    mean = torch.where(n > 0, sums / n.clamp(min=1), torch.zeros_like(sums))
    energy = norms.double() ** 2
    m2 = (energy - n * mean**2).clamp(min=0)
    exact = ((n * mean**2 > 0.01 * energy) & (n > 0)).tolist()
    pos = {j: i for i, j in enumerate(nonempty)}
    redo = [j for j in range(k) if exact[j]]
    if redo:
        centred = torch._foreach_sub([full[pos[j]] for j in redo], [float(mean[j]) for j in redo])
        m2[redo] = torch.stack(list(torch._foreach_norm(centred, 2))).double() ** 2
    return mean.float(), m2.float()


def merge_parts(gathered: torch.Tensor) -> torch.Tensor:
    """Merge per-rank parts ``[ranks, k, 8]`` of the same tensors into parts of the whole ``[k, 8]``."""
    n_i = gathered[..., _N]
    n = n_i.sum(0)
    safe_n = torch.where(n > 0, n, torch.ones_like(n))
    mean_i = torch.where(n_i > 0, gathered[..., _MEAN], torch.zeros_like(n_i))
    mean = (n_i * mean_i).sum(0) / safe_n
    m2 = (gathered[..., _M2] + n_i * (mean_i - mean) ** 2).sum(0)
    merged = torch.empty_like(gathered[0])
    merged[:, _N] = n
    merged[:, _MEAN] = mean
    merged[:, _M2] = m2
    merged[:, _NORM] = torch.sqrt((gathered[..., _NORM] ** 2).sum(0))
    merged[:, _MIN] = gathered[..., _MIN].amin(0)
    merged[:, _MAX] = gathered[..., _MAX].amax(0)
    merged[:, _ZEROS] = gathered[..., _ZEROS].sum(0)
    merged[:, _NONFINITE] = gathered[..., _NONFINITE].sum(0)
    return merged


def _as_float(t: torch.Tensor) -> torch.Tensor:
    x = t.detach()
    local = getattr(x, "to_local", None)
    if local is not None:  # a DTensor: this rank's part (merged across ranks by the caller)
        x = local()
    if x.dtype != torch.float32:
        x = x.float()
    return x


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _flat_float(t: torch.Tensor) -> torch.Tensor:
    x = _as_float(t)
    return x if x.is_contiguous() else x.contiguous()


def sharding_group(t: torch.Tensor) -> Any:
    """The process group over which ``t`` (a ``DTensor`` sharded on a 1-D mesh) is split, or ``None``."""
    if type(t) in _PLAIN:  # a plain tensor or Parameter (``Parameter(dtensor)`` stays a DTensor)
        return None
    placements = getattr(t, "placements", None)
    if not placements or not any(p.is_shard() for p in placements):
        return None
    mesh = t.device_mesh
    if mesh.ndim != 1:
        raise ConfigurationError(
            f"statistics: a parameter sharded over a {mesh.ndim}-D device mesh is not supported (1-D only)"
        )
    return mesh.get_group()


def gather_parts(parts: torch.Tensor, group: Any) -> torch.Tensor:
    """All ranks' ``parts`` of the same tensors, ``[world, k, 8]`` (one collective)."""
    import torch.distributed as dist

    world = dist.get_world_size(group)
    out = [torch.empty_like(parts) for _ in range(world)]
    dist.all_gather(out, parts.contiguous(), group=group)
    return torch.stack(out)


def split_sharded(tensors: Iterable[torch.Tensor]) -> tuple[list[int], list[int], Any]:
    """Indices of the unsharded and sharded tensors, and the sharded tensors' group."""
    plain: list[int] = []
    sharded: list[int] = []
    group = None
    for i, t in enumerate(tensors):
        g = sharding_group(t)
        if g is None:
            plain.append(i)
        else:
            if group is not None and g is not group:
                raise ConfigurationError("statistics: parameters sharded over different process groups")
            group = g
            sharded.append(i)
    return plain, sharded, group

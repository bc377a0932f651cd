"""Which worker this process is: rank and world size, from the launcher that started it.

Each process writes its own files named ``worker_<rank>`` (FORMAT.md 6), and
the collections file's ``_meta.num_workers`` tells readers how many workers
make a complete step. Sources, first match wins:

1. ``torch.distributed`` when it is initialized (only looked at if torch is
   already imported: the numpy hook must not import torch);
2. Horovod / Open MPI: ``HOROVOD_RANK``/``HOROVOD_SIZE``,
   ``OMPI_COMM_WORLD_RANK``/``OMPI_COMM_WORLD_SIZE``;
3. the usual launcher variables: ``RANK``/``WORLD_SIZE`` (torchrun), then
   ``LOCAL_RANK``/``LOCAL_WORLD_SIZE`` (single node);
4. otherwise a single worker, ``worker_0``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from tornasole.exceptions import ConfigurationError

__all__ = ["WorkerInfo", "detect_worker", "DEFAULT_WORKER"]

DEFAULT_WORKER = "worker_0"
_ENV_PAIRS = (
    ("HOROVOD_RANK", "HOROVOD_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("RANK", "WORLD_SIZE"),
    ("LOCAL_RANK", "LOCAL_WORLD_SIZE"),
)


@dataclass(frozen=True)
class WorkerInfo:
    """This process's rank among ``world_size`` workers, and where that was learnt."""

    rank: int = 0
    world_size: int = 1
    source: str = "default"

    @property
    def name(self) -> str:
        """The file-name worker part, ``worker_<rank>``."""
        return f"worker_{self.rank}"

    @property
    def is_chief(self) -> bool:
        return self.rank == 0


def _int_env(env: Mapping[str, str], var: str) -> int | None:
    raw = env.get(var)
    if raw is None or raw.strip() == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ConfigurationError(f"environment variable {var}={raw!r} is not an integer") from None


def _from_torch() -> WorkerInfo | None:
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    try:
        if dist.is_available() and dist.is_initialized():
            return WorkerInfo(dist.get_rank(), dist.get_world_size(), "torch.distributed")
    except (RuntimeError, AttributeError):
        return None
    return None


def detect_worker(env: Mapping[str, str] | None = None) -> WorkerInfo:
    """Rank and world size of this process (see the module docstring for the order).

    Examples
    --------
    >>> detect_worker({"RANK": "1", "WORLD_SIZE": "4"}).name
    'worker_1'
    >>> detect_worker({}).world_size
    1
    """
    found = _from_torch()
    if found is not None:
        return found
    env = os.environ if env is None else env
    for rank_var, size_var in _ENV_PAIRS:
        rank = _int_env(env, rank_var)
        if rank is None:
            continue
        size = _int_env(env, size_var)
        if size is None:
            size = max(rank + 1, 1)
        if rank < 0 or rank >= size:
            raise ConfigurationError(f"{rank_var}={rank} is not within [0, {size_var}={size})")
        return WorkerInfo(rank, size, rank_var)
    return WorkerInfo()

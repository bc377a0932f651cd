"""``record_batch``: save the step's batch fingerprint, so DataReplay can tell replayed data after a resume.

Why a fingerprint and not the batch: whether two steps trained on the same data needs only a hash of the
input (:mod:`tornasole.core.batch_fingerprint`), one float a step; the input ids of a language model's batch
are a few kilobytes, hashed on the host after one copy (what a loader hands the loop is usually still on
the host: no copy then). Call it once a step, after the step's first forward pass (the hook starts a step
on a forward pass, as for ``hook.save_tensor``), with what the model is fed (a tensor, or a dict/list/tuple of
tensors: each is hashed, in order), and with the epoch when the loop knows it: DataReplay then compares a
step only with earlier steps of its own epoch, so an epoch that repeats the previous one's order (no
shuffling) is not taken for a replay.

Examples
--------
>>> # for epoch in range(epochs):
>>> #     for batch in loader:
>>> #         logits = model(batch["input_ids"])
>>> #         record_batch(hook, batch["input_ids"], epoch=epoch)
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from tornasole.core.batch_fingerprint import FINGERPRINT_BITS, fingerprint_record
from tornasole.core.llm_signals import BATCH_FINGERPRINT
from tornasole.exceptions import ConfigurationError

__all__ = ["DATA_COLLECTION", "batch_values", "record_batch"]

DATA_COLLECTION = "data"


def _tensors(batch: Any, where: str) -> list[np.ndarray]:
    if isinstance(batch, torch.Tensor):
        return [batch.detach().cpu().numpy()]
    if isinstance(batch, np.ndarray):
        return [batch]
    if isinstance(batch, Mapping):
        return [a for key in sorted(batch, key=str) for a in _tensors(batch[key], f"{where}[{key!r}]")]
    if isinstance(batch, (list, tuple)) and batch:
        return [a for i, item in enumerate(batch) for a in _tensors(item, f"{where}[{i}]")]
    raise ConfigurationError(
        f"record_batch: {where} is a {type(batch).__name__}; expected a tensor, an array, or a "
        "dict/list/tuple of them"
    )


def batch_values(batch: Any) -> np.ndarray:
    """One array whose fingerprint stands for the whole batch (each part's own fingerprint, in order)."""
    parts = _tensors(batch, "batch")
    if len(parts) == 1:
        return parts[0]
    h = hashlib.blake2b(digest_size=FINGERPRINT_BITS // 8)
    for a in parts:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return np.frombuffer(h.digest(), dtype=np.uint8)


def record_batch(hook: Any, batch: Any, name: str = "input", epoch: int | None = None) -> None:
    """Save ``batch_fingerprint/<name>`` = ``[fingerprint, epoch]`` for the current step (collection
    ``data``, saved at the steps the hook's save configuration saves)."""
    if not isinstance(name, str) or not name or "/" in name:
        raise ConfigurationError(f"record_batch: name must be a non-empty string without '/', got {name!r}")
    try:
        record = fingerprint_record(batch_values(batch), epoch)
    except ValueError as e:
        raise ConfigurationError(f"record_batch: {e}") from None
    hook.save_tensor(f"{BATCH_FINGERPRINT}/{name}", record, DATA_COLLECTION)

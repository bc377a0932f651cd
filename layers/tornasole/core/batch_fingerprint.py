"""A batch's fingerprint: a few bytes that say whether two steps trained on the same data.

Why: a resume that restores the model and optimiser but not the data loader's position replays data the
run already trained on (or skips data it never saw), and nothing in the weights, gradients or loss says
so. Saving a whole batch every step is too much; a 48-bit hash of its values is one float per step, and two
steps with equal fingerprints trained on the same batch (a collision among 2**48 values is negligible over
any run's steps). 48 bits because a float64 holds every integer below 2**53 exactly, so the fingerprint
survives any reader of smdebug's format unchanged.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["FINGERPRINT_BITS", "NO_EPOCH", "fingerprint", "fingerprint_record"]

FINGERPRINT_BITS = 48
#: The epoch of a record whose loop did not say which epoch it was in.
NO_EPOCH = -1


def fingerprint(values: np.ndarray) -> int:
    """A 48-bit hash of ``values``: its dtype, shape and bytes (equal arrays, equal fingerprints).

    Examples
    --------
    >>> fingerprint(np.arange(4)) == fingerprint(np.arange(4))
    True
    >>> fingerprint(np.arange(4)) == fingerprint(np.arange(1, 5))
    False
    """
    a = np.ascontiguousarray(values)
    h = hashlib.blake2b(digest_size=FINGERPRINT_BITS // 8)
    h.update(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())
    return int.from_bytes(h.digest(), "big")


def fingerprint_record(values: np.ndarray, epoch: int | None = None) -> np.ndarray:
    """``[fingerprint, epoch]`` as float64 (epoch :data:`NO_EPOCH` when not given): what is saved."""
    if epoch is not None and (not isinstance(epoch, (int, np.integer)) or epoch < 0):
        raise ValueError(f"epoch must be a non-negative integer, got {epoch!r}")
    return np.array([fingerprint(values), NO_EPOCH if epoch is None else int(epoch)], dtype=np.float64)

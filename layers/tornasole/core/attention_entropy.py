"""Attention entropy normalised to [0, 1]: shared by the rule that judges it and the helper that saves it.

Why normalised: a query that may attend to ``n`` keys has an entropy between 0 (all weight on one key)
and ``log n`` (uniform); dividing by ``log n`` makes layers, sequence lengths and the rows of a causal
mask comparable. Under a causal mask query ``i`` sees ``i + 1`` keys (the masked weights are exactly 0);
a mask is recognised when every weight above the diagonal is 0. Rows that see a single key carry no
information and are left out.
"""

from __future__ import annotations

import numpy as np

__all__ = ["normalised_entropy"]


def normalised_entropy(weights: np.ndarray) -> float | None:
    """Mean over queries (and batch, heads) of ``H(row) / log(keys the row may see)``; None if no row counts.

    ``weights``: attention probabilities with keys on the last axis and queries on the one before
    (``(..., queries, keys)``); a 1-D array is one row.

    Examples
    --------
    >>> round(normalised_entropy(np.full((2, 4), 0.25)), 6)
    1.0
    >>> normalised_entropy(np.eye(3)[:, :])  # causal and one-hot: collapsed
    0.0
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim == 1:
        w = w[None, :]
    q, k = w.shape[-2], w.shape[-1]
    rows = w.reshape(-1, q, k)
    seen = np.full((q,), k, dtype=np.int64)
    if q == k and q > 1 and not np.any(np.triu(np.abs(rows).sum(axis=0), 1)):
        seen = np.arange(1, q + 1)
    keep = seen >= 2
    if not keep.any():
        return None
    p = np.clip(rows, 0.0, None)
    total = p.sum(axis=-1, keepdims=True)
    p = np.divide(p, total, out=np.zeros_like(p), where=total > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=-1)  # (n, q)
    norm = h[:, keep] / np.log(seen[keep])[None, :]
    return float(np.mean(norm))

"""Building TensorBoard ``Event`` payloads: scalar summaries and histograms.

Histograms use TensorFlow's default bucket edges (exponentially spaced by 1.1
from 1e-12 to 1e20, mirrored for negatives, as smdebug and TF do) and keep
only the buckets around the data, with one empty bucket on the left so
TensorBoard knows where the first one starts. Values are counted in float64;
non-finite values cannot be histogrammed by TensorBoard and are left out (the
raw tensor, if saved, still has them).
"""

from __future__ import annotations

import functools
import re
import time

import numpy as np

from tornasole.format.proto import messages

__all__ = ["clean_tag", "scalar_event", "histogram_event", "default_bucket_edges"]

_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w.]")


def clean_tag(name: str) -> str:
    """TensorBoard-safe tag: characters outside ``[-/\\w.]`` become ``_``, leading slashes go.

    >>> clean_tag("/Net fc1:0")
    'Net_fc1_0'
    """
    return _INVALID_TAG_CHARACTERS.sub("_", name).lstrip("/")


@functools.cache
def default_bucket_edges() -> np.ndarray:
    """TensorFlow's default histogram bucket edges (about 1,500 of them)."""
    v = 1e-12
    pos = []
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    return np.array([-x for x in reversed(pos)] + [0.0] + pos)


def scalar_event(tag: str, value: float, step: int, wall_time: float | None = None) -> bytes:
    """An ``Event`` payload holding one ``simple_value`` summary.

    >>> len(scalar_event("loss", 0.5, 3, wall_time=1.0)) > 0
    True
    """
    m = messages()
    ev = m.Event(wall_time=time.time() if wall_time is None else wall_time, step=int(step))
    ev.summary.value.add(tag=clean_tag(tag), simple_value=float(value))
    return ev.SerializeToString()


def histogram_event(tag: str, values: np.ndarray, step: int, wall_time: float | None = None) -> bytes | None:
    """An ``Event`` payload holding a histogram of ``values``; ``None`` when nothing can be counted.

    >>> histogram_event("w", np.array([np.nan]), 0) is None
    True
    """
    arr = np.asarray(values)
    if arr.dtype == bool or arr.size == 0 or not (np.issubdtype(arr.dtype, np.number)):
        return None
    flat = arr.astype(np.float64).reshape(-1)
    flat = flat[np.isfinite(flat)]
    if flat.size == 0:
        return None
    edges = default_bucket_edges()
    counts, limits = np.histogram(flat, bins=edges)
    nonzero = np.flatnonzero(counts)
    start, end = int(nonzero[0]), int(nonzero[-1]) + 1
    # TensorBoard reads only right edges: keep one empty bucket left of the data for the left edge.
    kept_counts = counts[start - 1 : end] if start > 0 else np.concatenate([[0], counts[:end]])
    kept_limits = limits[start : end + 1]
    m = messages()
    hist = m.HistogramProto(
        min=float(flat.min()),
        max=float(flat.max()),
        num=float(flat.size),
        sum=float(flat.sum()),
        sum_squares=float(flat.dot(flat)),
        bucket_limit=kept_limits.tolist(),
        bucket=kept_counts.astype(np.float64).tolist(),
    )
    ev = m.Event(wall_time=time.time() if wall_time is None else wall_time, step=int(step))
    ev.summary.value.add(tag=clean_tag(tag), histo=hist)
    return ev.SerializeToString()

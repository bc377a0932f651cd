"""Bounded, JSON-serialisable summaries a profiler rule keeps between files.

A serverless rule sees one new file per invocation and must not re-read the run's history, so it
carries a small state from file to file (stored in the job's DynamoDB item, 400 KB at most). What it
keeps has to be bounded by its parameters, never by the length of the run:

- a utilisation (a percentage) is kept as an integer percent; a window of the last ``n`` of them is a
  string of ``n`` characters (one per sample), so a 2,000-sample window costs 2 KB;
- a histogram of percentages is 101 counts, whatever the number of samples;
- a running mean and variance is Welford's three numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

__all__ = [
    "MAX_WINDOW",
    "percent",
    "window_push",
    "window_values",
    "percentile",
    "hist_add",
    "hist_percentile",
    "welford_add",
    "welford_std",
]

#: The largest ``window`` a rule accepts: its state must fit a DynamoDB item with room to spare.
MAX_WINDOW = 5000
_OFFSET = 32  # printable characters only: ' ' is 0%, chr(132) is 100%


def percent(value: float) -> int:
    """A utilisation clamped to 0..100 and rounded to a whole percent."""
    return max(0, min(100, int(round(value))))


def window_push(window: str, values: Iterable[float], size: int) -> str:
    """``window`` with ``values`` appended (as whole percents), keeping the last ``size``."""
    added = "".join(chr(_OFFSET + percent(v)) for v in values)
    return (window + added)[-size:] if size > 0 else ""


def window_values(window: str) -> list[int]:
    return [ord(c) - _OFFSET for c in window]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = int(math.floor(rank))
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def hist_add(hist: list[int] | None, values: Iterable[float]) -> list[int]:
    """A 101-bin histogram of whole percents with ``values`` counted in."""
    out = list(hist) if hist else [0] * 101
    for v in values:
        out[percent(v)] += 1
    return out


def hist_percentile(hist: Sequence[int], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of a 101-bin percent histogram; NaN when empty."""
    total = sum(hist)
    if total == 0:
        return math.nan
    target = max(1, math.ceil(total * q / 100.0))
    seen = 0
    for value, count in enumerate(hist):
        seen += count
        if seen >= target:
            return float(value)
    return 100.0


def welford_add(stats: list[float] | None, value: float) -> list[float]:
    """``[n, mean, m2]`` with ``value`` added (Welford's online mean and variance)."""
    n, mean, m2 = stats if stats else (0.0, 0.0, 0.0)
    n += 1
    delta = value - mean
    mean += delta / n
    m2 += delta * (value - mean)
    return [n, mean, m2]


def welford_std(stats: Sequence[float]) -> float:
    """The population standard deviation of a ``[n, mean, m2]``; 0 below two values."""
    n, _, m2 = stats
    return math.sqrt(m2 / n) if n >= 2 else 0.0

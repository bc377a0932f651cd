"""Small inline-SVG charts: line charts, histograms and stacked bars, with no plotting library.

Why our own: the report is one file that opens without a network (no CDN script, no font fetch) and
must stay small for a 10,000-step job, so every series is cut to at most ``MAX_POINTS`` points before it
is drawn (:func:`downsample` keeps each bucket's minimum and maximum, so a spike survives) and each chart
is a handful of ``<path>`` elements. Labels are escaped here: a series label is a tensor or rule name,
which the user chose.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["MAX_POINTS", "PALETTE", "Line", "downsample", "histogram", "line_chart", "stacked_bar"]

#: Points drawn per series (each bucket keeps its minimum and maximum: 2 points per bucket).
MAX_POINTS = 600
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_W, _H = 640, 220
_LEFT, _RIGHT, _TOP, _BOTTOM = 62, 12, 12, 30


@dataclass(frozen=True)
class Line:
    """One series of a line chart: its label and (x, y) points (non-finite y values are left out)."""

    label: str
    xs: Sequence[float]
    ys: Sequence[float]


def downsample(xs: Sequence[float], ys: Sequence[float], max_points: int = MAX_POINTS):
    """At most ``max_points`` (x, y) pairs: equal buckets by index, each keeping its min and max, in order.

    >>> downsample(list(range(10)), [0, 5, 1, 1, 1, 1, 1, 1, 9, 1], 4)
    ([0, 1, 5, 8], [0, 5, 1, 9])
    """
    n = len(xs)
    if n <= max_points:
        return list(xs), list(ys)
    buckets = max(1, max_points // 2)
    out_x: list[float] = []
    out_y: list[float] = []
    for b in range(buckets):
        lo, hi = b * n // buckets, (b + 1) * n // buckets
        if lo >= hi:
            continue
        chunk = range(lo, hi)
        i_min = min(chunk, key=lambda i: ys[i])
        i_max = max(chunk, key=lambda i: ys[i])
        for i in sorted({i_min, i_max}):
            out_x.append(xs[i])
            out_y.append(ys[i])
    return out_x, out_y


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.2e}"
    return f"{v:.4g}"


def _ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    if hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / n for i in range(n + 1)]


def _frame(
    chart_id: str, title: str, x_label: str, x_lo: float, x_hi: float, y_lo: float, y_hi: float, y_log: bool
):
    """The opening of an SVG with its axes, ticks and title, and the two scale functions."""
    pw, ph = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def sx(x: float) -> float:
        return _LEFT + (0.5 if x_hi == x_lo else (x - x_lo) / (x_hi - x_lo)) * pw

    def sy(y: float) -> float:
        v = math.log10(y) if y_log else y
        return _TOP + ph - (0.5 if y_hi == y_lo else (v - y_lo) / (y_hi - y_lo)) * ph

    parts = [
        f'<svg id="{escape(chart_id)}" class="chart" role="img" viewBox="0 0 {_W} {_H}" '
        f'width="{_W}" height="{_H}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<rect x="{_LEFT}" y="{_TOP}" width="{pw}" height="{ph}" fill="#fff" stroke="#bbb"/>',
    ]
    for t in _ticks(y_lo, y_hi):
        y = _TOP + ph - (0.5 if y_hi == y_lo else (t - y_lo) / (y_hi - y_lo)) * ph
        label = _fmt(10**t) if y_log else _fmt(t)
        parts.append(f'<line x1="{_LEFT}" x2="{_LEFT + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{_LEFT - 4}" y="{y + 4:.1f}" text-anchor="end" class="tick">{label}</text>')
    for t in _ticks(x_lo, x_hi):
        x = sx(t)
        parts.append(
            f'<text x="{x:.1f}" y="{_TOP + ph + 14}" text-anchor="middle" class="tick">{_fmt(t)}</text>'
        )
    parts.append(
        f'<text x="{_LEFT + pw / 2}" y="{_H - 2}" text-anchor="middle" class="axis">{escape(x_label)}</text>'
    )
    return parts, sx, sy


def line_chart(
    chart_id: str,
    title: str,
    lines: Sequence[Line],
    x_label: str = "step",
    markers: Sequence[float] = (),
    log_y: bool | None = None,
    y_range: tuple[float, float] | None = None,
) -> str:
    """An SVG line chart; ``markers``: x positions drawn as red ticks along the top (rule firings).

    ``log_y`` None: a log axis when every value is positive and they span more than four decades (a
    diverging loss stays readable). ``y_range``: a fixed axis (percentages: 0 to 100) widened to the data."""
    clean = []
    for line in lines:
        pts = [(x, y) for x, y in zip(line.xs, line.ys) if math.isfinite(y)]
        xs, ys = downsample([p[0] for p in pts], [p[1] for p in pts])
        clean.append((line.label, xs, ys))
    all_y = [y for _, _, ys in clean for y in ys]
    all_x = [x for _, xs, _ in clean for x in xs] + list(markers)
    if not all_y:
        return f'<p class="empty" id="{escape(chart_id)}">{escape(title)}: no finite values to draw</p>'
    positive = all(y > 0 for y in all_y)
    if log_y is None:
        log_y = positive and max(all_y) / min(all_y) > 1e4
    log_y = bool(log_y and positive)
    tr = math.log10 if log_y else float
    y_lo, y_hi = tr(min(all_y)), tr(max(all_y))
    if y_range is not None and not log_y:
        y_lo, y_hi = min(y_lo, y_range[0]), max(y_hi, y_range[1])
    parts, sx, sy = _frame(chart_id, title, x_label, min(all_x), max(all_x), y_lo, y_hi, log_y)
    for i, (label, xs, ys) in enumerate(clean):
        if not xs:
            continue
        color = PALETTE[i % len(PALETTE)]
        d = " ".join(
            f"{'M' if j == 0 else 'L'}{sx(x):.1f},{sy(y):.1f}" for j, (x, y) in enumerate(zip(xs, ys))
        )
        parts.append(
            f'<path d="{d}" fill="none" stroke="{color}" stroke-width="1.5">'
            f"<title>{escape(label)}</title></path>"
        )
    for m in sorted(set(markers))[:MAX_POINTS]:
        x = sx(m)
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{_TOP}" y2="{_TOP + 8}" stroke="#d62728" stroke-width="2"/>'
        )
    parts.append("</svg>")
    legend = "".join(
        f'<span class="key"><i style="background:{PALETTE[i % len(PALETTE)]}"></i>{escape(label)}</span>'
        for i, (label, _, _) in enumerate(clean)
    )
    return f"<figure>{''.join(parts)}<figcaption>{escape(title)} {legend}</figcaption></figure>"


def histogram(chart_id: str, title: str, values: Sequence[float], x_label: str, bins: int = 30) -> str:
    """An SVG histogram of ``values`` in ``bins`` equal bins."""
    vals = [v for v in values if math.isfinite(v)]
    if not vals:
        return f'<p class="empty" id="{escape(chart_id)}">{escape(title)}: no values</p>'
    lo, hi = min(vals), max(vals)
    width = (hi - lo) / bins if hi > lo else 1.0
    counts = [0] * bins
    for v in vals:
        counts[min(bins - 1, int((v - lo) / width)) if hi > lo else 0] += 1
    parts, sx, sy = _frame(chart_id, title, x_label, lo, lo + width * bins, 0, max(counts), False)
    for i, c in enumerate(counts):
        if not c:
            continue
        x0, x1 = sx(lo + i * width), sx(lo + (i + 1) * width)
        y = sy(c)
        parts.append(
            f'<rect x="{x0:.1f}" y="{y:.1f}" width="{max(1.0, x1 - x0 - 1):.1f}" height="{sy(0) - y:.1f}" '
            f'fill="{PALETTE[0]}"><title>{c} in [{_fmt(lo + i * width)}, '
            f"{_fmt(lo + (i + 1) * width)})</title></rect>"
        )
    parts.append("</svg>")
    return f"<figure>{''.join(parts)}<figcaption>{escape(title)}</figcaption></figure>"


def stacked_bar(chart_id: str, title: str, parts_: Sequence[tuple[str, float]], unit: str = "ms") -> str:
    """One horizontal bar split by share (a phase breakdown), with a legend giving each total."""
    total = sum(v for _, v in parts_ if v > 0)
    if total <= 0:
        return f'<p class="empty" id="{escape(chart_id)}">{escape(title)}: nothing recorded</p>'
    x = 0.0
    rects, keys = [], []
    for i, (label, v) in enumerate(parts_):
        if v <= 0:
            continue
        w = v / total * (_W - 2)
        color = PALETTE[i % len(PALETTE)]
        share = f"{label}: {_fmt(v)} {unit} ({100 * v / total:.1f}%)"
        rects.append(
            f'<rect x="{1 + x:.1f}" y="4" width="{w:.1f}" height="28" fill="{color}">'
            f"<title>{escape(share)}</title></rect>"
        )
        keys.append(f'<span class="key"><i style="background:{color}"></i>{escape(share)}</span>')
        x += w
    svg = (
        f'<svg id="{escape(chart_id)}" class="chart" role="img" viewBox="0 0 {_W} 36" '
        f'width="{_W}" height="36" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>{"".join(rects)}</svg>'
    )
    return f"<figure>{svg}<figcaption>{escape(title)} {''.join(keys)}</figcaption></figure>"

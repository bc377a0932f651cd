"""Plain-text tables for terminal output (no dependency for something this small).

Cells are cut with an ellipsis only for a person looking at a terminal; piped
or redirected output (a script, ``grep``, a file) always gets the full text,
so nothing a user asked for is ever hidden (see :func:`cell_width`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TextIO

__all__ = ["cell_width", "format_table"]


def cell_width(width: int, stream: TextIO | None = None) -> int | None:
    """``width`` when ``stream`` (default stdout) is an interactive terminal, else None (no cut)."""
    stream = sys.stdout if stream is None else stream
    try:
        return width if stream.isatty() else None
    except (AttributeError, ValueError):  # closed or not a real stream
        return None


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], max_width: int | None = 80) -> str:
    """Left-aligned columns; cells longer than ``max_width`` are cut with an ellipsis (None: never)."""

    def cell(v: Any) -> str:
        s = "-" if v is None else str(v).replace("\n", " ")
        return s if max_width is None or len(s) <= max_width else s[: max_width - 1] + "…"

    body = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in body]
    return "\n".join(lines)

"""Helpers for analysing trials interactively and in rules (smdebug's ``smdebug.analysis``)."""

from __future__ import annotations

__all__ = ["utils"]

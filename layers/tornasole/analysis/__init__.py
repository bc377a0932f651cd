"""Helpers for analysing trials interactively and in rules (smdebug's ``smdebug.analysis``).

Floor plan: imported by rules, cli and demo; imports only modes, exceptions and extras.
"""

from __future__ import annotations

__all__ = ["utils"]

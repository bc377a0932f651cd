"""The built-in rules (RULES.md's tensor table), one module each; name = class name.

Classes are imported on first access, so ``import tornasole.rules.builtin``
stays cheap. ``recommended`` holds the set a job gets when it names no rules.
Other packages import rules by name through :mod:`tornasole.rules.registry`
(or ``tornasole.rules.generic``, smdebug's path), not these modules.

Examples
--------
>>> from tornasole.rules.builtin import VanishingGradient, LossNotDecreasing
"""

from __future__ import annotations

import importlib
from typing import Any

from tornasole.rules.registry import BUILTIN_RULES

__all__ = sorted(BUILTIN_RULES)


def __getattr__(name: str) -> Any:
    module = BUILTIN_RULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value

"""``tornasole.rules.generic``: smdebug's path to the built-in rules of ``tornasole.rules.builtin``.

Kept because smdebug's users write ``from smdebug.rules.generic import ExplodingTensor`` and module
paths such as ``tornasole.rules.generic.dead_relu``: both give the objects of ``tornasole.rules.builtin``
(the same classes, not copies; :mod:`tornasole.moved_modules` says why a finder serves the module paths).

Examples
--------
>>> from tornasole.rules.generic import VanishingGradient
>>> from tornasole.rules.builtin import VanishingGradient as Same
>>> VanishingGradient is Same
True
"""

from __future__ import annotations

from typing import Any

from tornasole.moved_modules import alias_package
from tornasole.rules import builtin

__all__ = builtin.__all__

alias_package(__name__, builtin.__name__)


def __getattr__(name: str) -> Any:
    try:
        return getattr(builtin, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None

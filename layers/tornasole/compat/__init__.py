"""Compatibility with code written for smdebug (opt-in; nothing here is imported by ``import tornasole``).

Floor plan: imported only by the ``tornasole`` root (``install_smdebug_alias``) and by users; it
imports ``tornasole.rules.loader`` and, by name, whatever an smdebug path maps to.

* :mod:`tornasole.compat.alias`: the process-wide ``smdebug`` -> ``tornasole`` import alias
  (``install_smdebug_alias``, ``uninstall_smdebug_alias``, ``python -m tornasole.compat.smdebug_alias``).
* ``import tornasole.compat.smdebug_alias``: the one-line way to turn the alias on.
"""

from __future__ import annotations

from tornasole.compat.alias import (
    ALIAS_ENV,
    SmdebugAliasError,
    alias_installed,
    install_smdebug_alias,
    uninstall_smdebug_alias,
)

__all__ = [
    "ALIAS_ENV",
    "SmdebugAliasError",
    "alias_installed",
    "install_smdebug_alias",
    "uninstall_smdebug_alias",
]

"""Old module paths that keep importing after a module moved: the old name answers with the new module.

Why a finder rather than a file left at each old path: the old path gives the very module object of
the new one (its classes, private helpers and module state are the same objects, so ``isinstance`` and
``is`` hold whichever path a user imported), and no file stays where the moved one stood, so git still
sees the move as a rename and carries edits made to the old file onto the new one. The finder answers
only the names registered here (:func:`alias_module`, :func:`alias_package`) and only when the new
module exists; any other name is left to the import system.

Examples
--------
>>> alias_module("tornasole.rules.recommended", "tornasole.rules.builtin.recommended")
>>> import tornasole.rules.recommended, tornasole.rules.builtin.recommended
>>> tornasole.rules.recommended is tornasole.rules.builtin.recommended
True
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import types
from typing import Any

__all__ = [
    "ModuleUnderOtherName",
    "MovedModuleFinder",
    "alias_module",
    "alias_package",
    "new_name",
    "spec_for_alias",
]

_modules: dict[str, str] = {}  # old module name -> new module name
_packages: dict[str, str] = {}  # old package name -> new package (old.X stands for new.X)
_lock = threading.Lock()


def new_name(old: str) -> str | None:
    """The module ``old`` moved to, or ``None`` (not a registered old path).

    >>> alias_package("tornasole.rules.generic", "tornasole.rules.builtin")
    >>> new_name("tornasole.rules.generic.dead_relu"), new_name("tornasole.rules.generic")
    ('tornasole.rules.builtin.dead_relu', None)
    """
    if old in _modules:
        return _modules[old]
    package, _, leaf = old.rpartition(".")
    if package in _packages:
        return f"{_packages[package]}.{leaf}"
    return None


class ModuleUnderOtherName(importlib.abc.Loader):
    """Hands an imported module to the import system under another name, keeping the module's own spec.

    Shared by this finder (old paths) and :mod:`tornasole.compat.alias` (smdebug's names).
    """

    def __init__(self, module: types.ModuleType) -> None:
        self.module = module
        self.own_spec = getattr(module, "__spec__", None)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return self.module

    def exec_module(self, module: types.ModuleType) -> None:
        # the import system stamped the alias's spec on the module: give the module its own back
        if self.own_spec is not None:
            module.__spec__ = self.own_spec


def spec_for_alias(
    fullname: str, module: types.ModuleType, loader_type: type[ModuleUnderOtherName] = ModuleUnderOtherName
) -> importlib.machinery.ModuleSpec:
    """The spec that makes ``import fullname`` give ``module`` (a package's submodules resolve too)."""
    is_package = hasattr(module, "__path__")
    spec = importlib.machinery.ModuleSpec(fullname, loader_type(module), is_package=is_package)
    if is_package:
        spec.submodule_search_locations = list(module.__path__)
    return spec


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """``sys.meta_path`` entry (last, after the path finder) resolving the registered old names."""

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        moved = new_name(fullname)
        if moved is None or importlib.util.find_spec(moved) is None:
            return None
        return spec_for_alias(fullname, importlib.import_module(moved))


def _install() -> None:
    with _lock:
        if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
            sys.meta_path.append(MovedModuleFinder())


def alias_module(old: str, new: str) -> None:
    """Make ``import old`` give module ``new`` (imported when ``old`` is first asked for)."""
    _modules[old] = new
    _install()


def alias_package(old: str, new: str) -> None:
    """Make ``import old.X`` give module ``new.X`` for every module ``X`` of package ``new``."""
    _packages[old] = new
    _install()

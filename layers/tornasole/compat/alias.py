"""A process-wide import alias so unchanged ``import smdebug...`` code runs on Tornasole.

Why: scripts, notebooks and rule files written for SageMaker Debugger say
``import smdebug.pytorch as smd`` or ``from smdebug.trials import create_trial``.
With the alias on, those imports resolve to the Tornasole modules of the same
role (the table the rule-file loader uses, :func:`tornasole.rules.loader.map_module_name`,
plus a few hook modules), for the whole process: ``sys.modules["smdebug.trials"]``
*is* ``tornasole.trials``, so objects and exceptions are shared. Only the
top-level ``smdebug`` is a module of its own (delegating to ``tornasole``), so
that smdebug-only submodules such as ``smdebug.exceptions`` never replace a
``tornasole`` attribute.

It is opt-in and refuses to start when the real smdebug is installed or
already imported (it would shadow it and mix two libraries in one process):
:class:`SmdebugAliasError` says so and how to proceed. Ways to turn it on:

* ``import tornasole.compat.smdebug_alias`` (the one-line change), or
  ``tornasole.install_smdebug_alias()``;
* ``TORNASOLE_SMDEBUG_ALIAS=1`` and ``import tornasole`` (notebooks);
* ``python -m tornasole.compat.smdebug_alias train.py ARGS...`` (no change at all).

No ``.pth`` file, no ``sitecustomize``: nothing happens in a process that did not ask.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import sys
import threading
import types
from pathlib import Path
from typing import Any

from tornasole.rules.loader import map_module_name

__all__ = [
    "ALIAS_ENV",
    "EXTRA_MODULES",
    "SmdebugAliasError",
    "alias_installed",
    "install_smdebug_alias",
    "uninstall_smdebug_alias",
    "target_module_name",
]

ALIAS_ENV = "TORNASOLE_SMDEBUG_ALIAS"

#: Hook-side smdebug modules whose Tornasole counterpart lives elsewhere (checked before the loader's table).
EXTRA_MODULES = {
    "smdebug.core.hook": "tornasole.hooks.numpy_hook",
    "smdebug.core.json_config": "tornasole.hooks.json_config",
    "smdebug.core.singleton_utils": "tornasole.hooks.singleton",
    "smdebug.pytorch.singleton_utils": "tornasole.pytorch",
    "smdebug.pytorch.collection": "tornasole.core",
    "smdebug.core.writer": "tornasole.format.writer",
    "smdebug.exceptions": "tornasole.compat.smdebug_exceptions",
}

_lock = threading.Lock()

#: On ``sys.path`` while the alias is on: its ``smdebug`` turns the alias on in spawned child processes.
SPAWN_PATH = str(Path(__file__).resolve().parent / "spawn")


class SmdebugAliasError(ImportError):
    """The alias cannot be turned on (the real smdebug is present) or an aliased module is missing."""


def target_module_name(name: str) -> str | None:
    """The Tornasole module an smdebug module name stands for, or ``None`` (not an smdebug name).

    >>> [target_module_name(n) for n in ("smdebug.pytorch", "smdebug.core.hook", "os")]
    ['tornasole.pytorch', 'tornasole.hooks.numpy_hook', None]
    """
    return EXTRA_MODULES.get(name) or map_module_name(name)


class _AliasLoader(importlib.abc.Loader):
    """Hands the already-imported Tornasole module to the import system under the smdebug name."""

    def __init__(self, module: types.ModuleType) -> None:
        self.module = module
        self.own_spec = getattr(module, "__spec__", None)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return self.module

    def exec_module(self, module: types.ModuleType) -> None:
        # the import system stamped the alias spec on the module: give the Tornasole module its own back
        if self.own_spec is not None:
            module.__spec__ = self.own_spec


class SmdebugAliasFinder(importlib.abc.MetaPathFinder):
    """``sys.meta_path`` entry resolving ``smdebug`` and ``smdebug.*`` to Tornasole modules."""

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        mapped = target_module_name(fullname)
        if mapped is None:
            return None
        try:
            module = _top_level_proxy() if fullname == "smdebug" else importlib.import_module(mapped)
        except ImportError as exc:
            raise SmdebugAliasError(
                f"{fullname} (mapped to {mapped}) is not provided by Tornasole: {exc}", name=fullname
            ) from exc
        spec = importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(module), is_package=hasattr(module, "__path__")
        )
        if hasattr(module, "__path__"):
            spec.submodule_search_locations = list(module.__path__)
        return spec


def _top_level_proxy() -> types.ModuleType:
    """The ``smdebug`` module: its own object, whose attributes are ``tornasole``'s.

    Why not ``tornasole`` itself: importing ``smdebug.exceptions`` sets the
    attribute ``exceptions`` on the ``smdebug`` module; on ``tornasole`` that
    would replace ``tornasole.exceptions``. Submodules with an smdebug-specific
    counterpart are imported through the alias, so ``smdebug.exceptions`` is
    the same object however it is reached.
    """
    import tornasole

    proxy = types.ModuleType("smdebug", "smdebug's names, served by Tornasole (tornasole.compat.alias).")
    proxy.__path__ = []  # a package: every submodule comes from SmdebugAliasFinder

    def __getattr__(name: str) -> Any:
        sub = f"smdebug.{name}"
        if EXTRA_MODULES.get(sub) or (map_module_name(sub) or "") != f"tornasole.{name}":
            try:
                return importlib.import_module(sub)
            except ImportError:
                pass
        return getattr(tornasole, name)

    proxy.__getattr__ = __getattr__  # type: ignore[method-assign]  # PEP 562 module __getattr__
    proxy.__version__ = tornasole.__version__
    return proxy


def alias_installed() -> bool:
    """Whether this process resolves ``smdebug`` imports to Tornasole."""
    return any(isinstance(f, SmdebugAliasFinder) for f in sys.meta_path)


def _real_smdebug_location() -> str | None:
    """Where a real smdebug is (installed distribution, importable package, imported module), if anywhere."""
    loaded = sys.modules.get("smdebug")
    if (
        loaded is not None
        and not (getattr(loaded, "__file__", None) or "").startswith(SPAWN_PATH + os.sep)
        and not isinstance(getattr(loaded, "__spec__", None) and loaded.__spec__.loader, _AliasLoader)
    ):
        return getattr(loaded, "__file__", None) or "an already imported module"
    try:
        dist = importlib.metadata.distribution("smdebug")
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        return f"the installed distribution smdebug {dist.version}"
    spec = importlib.util.find_spec("smdebug")
    if spec is not None and not (spec.origin or "").startswith(SPAWN_PATH + os.sep):
        return spec.origin or "an importable package"
    return None


def install_smdebug_alias() -> None:
    """Turn the alias on for this process (idempotent); :class:`SmdebugAliasError` if smdebug is present.

    After it, ``import smdebug.trials`` is ``tornasole.trials``.
    """
    with _lock:
        if alias_installed():
            return
        real = _real_smdebug_location()
        if real is not None:
            raise SmdebugAliasError(
                f"the real smdebug is present ({real}); the alias of smdebug to Tornasole would shadow it. "
                "Uninstall smdebug (pip uninstall smdebug) or use it directly, and import tornasole under "
                f"its own name; unset {ALIAS_ENV} if it is set.",
                name="smdebug",
            )
        sys.meta_path.insert(0, SmdebugAliasFinder())
        if SPAWN_PATH not in sys.path:
            sys.path.append(SPAWN_PATH)  # spawned children inherit sys.path: the alias follows them


def uninstall_smdebug_alias() -> None:
    """Turn the alias off and forget the ``smdebug`` entries it put in ``sys.modules``."""
    with _lock:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, SmdebugAliasFinder)]
        sys.path[:] = [p for p in sys.path if p != SPAWN_PATH]
        for name in [n for n in sys.modules if n == "smdebug" or n.startswith("smdebug.")]:
            module = sys.modules[name]
            if isinstance(getattr(module, "__loader__", None), _AliasLoader) or getattr(
                module, "__name__", ""
            ).startswith("tornasole"):
                del sys.modules[name]

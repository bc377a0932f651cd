"""Tornasole: save tensors from training jobs and evaluate rules on them (smdebug-compatible).

Public names are imported lazily so that ``import tornasole`` stays cheap and
never pulls in optional dependencies (boto3, torch) before they are needed.

Examples
--------
>>> from tornasole import Hook, SaveConfig, modes
>>> from tornasole.trials import create_trial
"""

from __future__ import annotations

import importlib
import os
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Hook": "tornasole.hooks.numpy_hook:Hook",
    "get_hook": "tornasole.hooks:get_hook",
    "set_hook": "tornasole.hooks:set_hook",
    "del_hook": "tornasole.hooks:del_hook",
    "CollectionManager": "tornasole.core.collection_manager:CollectionManager",
    "SaveConfig": "tornasole.core.save_config:SaveConfig",
    "SaveConfigMode": "tornasole.core.save_config:SaveConfigMode",
    "ReductionConfig": "tornasole.core.reduction_config:ReductionConfig",
    "Collection": "tornasole.core.collection:Collection",
    "CollectionKeys": "tornasole.core.collection:CollectionKeys",
    "create_trial": "tornasole.trials:create_trial",
    "modes": "tornasole.modes",
    "ModeKeys": "tornasole.modes:ModeKeys",
}

__all__ = [*_LAZY, "install_smdebug_alias", "__version__"]


def install_smdebug_alias() -> None:
    """Resolve ``import smdebug...`` to Tornasole for this process (:mod:`tornasole.compat.alias`)."""
    from tornasole.compat.alias import install_smdebug_alias as install

    install()


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'tornasole' has no attribute {name!r}")
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    value = getattr(module, attr) if attr else module
    globals()[name] = value
    return value


# Opt-in, for notebooks: the alias is installed once the package is fully initialized.
if os.environ.get("TORNASOLE_SMDEBUG_ALIAS", "").strip().lower() in ("1", "true", "yes", "on"):
    install_smdebug_alias()

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
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Hook": "tornasole.hooks.hook:Hook",
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

__all__ = [*_LAZY, "__version__"]


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'tornasole' has no attribute {name!r}")
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    value = getattr(module, attr) if attr else module
    globals()[name] = value
    return value

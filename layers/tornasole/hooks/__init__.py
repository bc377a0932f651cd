"""The framework-agnostic hook and its parts (saving numpy values into an smdebug-format trial).

Floor plan: imported by the framework hooks (pytorch, keras, xgboost) and training scripts; imports
core, format, storage, tensorboard and below, never trials, rules or the evaluator.

Examples
--------
>>> from tornasole.hooks import Hook, TrainingStopRequested
"""

from __future__ import annotations

from tornasole.hooks.config_paths import HookConfigNotFound
from tornasole.hooks.numpy_hook import DISABLE_ENV, Hook
from tornasole.hooks.singleton import framework_functions
from tornasole.hooks.stop_signal import TrainingStopRequested

# The core (numpy) hook's singleton functions; ``tornasole.get_hook`` is this one.
get_hook, set_hook, del_hook = framework_functions(lambda: Hook)

__all__ = [
    "Hook",
    "TrainingStopRequested",
    "DISABLE_ENV",
    "HookConfigNotFound",
    "get_hook",
    "set_hook",
    "del_hook",
]

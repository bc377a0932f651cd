"""Keras 3 support: ``tornasole.keras.Hook`` (alias ``KerasHook``), a callback for fit/evaluate/predict.

Floor plan: imported by ``tornasole.tensorflow`` (its smdebug names) and training scripts, never by
another framework hook or by rules; imports hooks, core, format and below.

Importing this package imports Keras (and so its backend); ``import tornasole`` does not.

Examples
--------
>>> import tornasole.keras as ts
>>> hook = ts.Hook("/tmp/run", save_config=ts.SaveConfig(save_interval=100), enabled=False)
"""

from __future__ import annotations

from tornasole import modes
from tornasole.core.collection import Collection, CollectionKeys
from tornasole.core.reduction_config import ReductionConfig
from tornasole.core.save_config import SaveConfig, SaveConfigMode
from tornasole.hooks.stop_signal import TrainingStopRequested
from tornasole.keras.hook import Hook
from tornasole.keras.singleton import get_hook, set_hook

KerasHook = Hook


__all__ = [
    "Hook",
    "KerasHook",
    "get_hook",
    "set_hook",
    "SaveConfig",
    "SaveConfigMode",
    "ReductionConfig",
    "Collection",
    "CollectionKeys",
    "TrainingStopRequested",
    "modes",
]

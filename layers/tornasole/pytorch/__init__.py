"""PyTorch support: ``tornasole.pytorch.Hook`` plus the config classes, as ``smdebug.pytorch`` exports them.

Examples
--------
>>> import tornasole.pytorch as ts
>>> hook = ts.Hook("/tmp/run", save_config=ts.SaveConfig(save_interval=100), enabled=False)
"""

from __future__ import annotations

from tornasole import modes
from tornasole.core.collection import Collection, CollectionKeys
from tornasole.core.reduction_config import ReductionConfig
from tornasole.core.save_config import SaveConfig, SaveConfigMode
from tornasole.hooks.stop_signal import TrainingStopRequested
from tornasole.pytorch.hook import Hook

__all__ = [
    "Hook",
    "SaveConfig",
    "SaveConfigMode",
    "ReductionConfig",
    "Collection",
    "CollectionKeys",
    "TrainingStopRequested",
    "modes",
]

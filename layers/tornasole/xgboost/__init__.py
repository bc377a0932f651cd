"""XGBoost support: ``tornasole.xgboost.Hook``, a ``TrainingCallback``, as ``smdebug.xgboost`` exports it.

Floor plan: imported by training scripts only; imports hooks, core and below.

Importing this package imports xgboost; ``import tornasole`` does not.

Examples
--------
>>> import tornasole.xgboost as ts
>>> hook = ts.Hook("/tmp/run", save_config=ts.SaveConfig(save_interval=5), enabled=False)
"""

from __future__ import annotations

from tornasole import modes
from tornasole.core.collection import Collection, CollectionKeys
from tornasole.core.save_config import SaveConfig, SaveConfigMode
from tornasole.xgboost.hook import Hook

__all__ = ["Hook", "SaveConfig", "SaveConfigMode", "Collection", "CollectionKeys", "modes"]

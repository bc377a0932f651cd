"""PyTorch support: ``tornasole.pytorch.Hook`` plus the config classes, as ``smdebug.pytorch`` exports them.

Floor plan: imported by demo and training scripts, never by another framework hook or by rules;
imports hooks, trials, core and below.

``get_hook(json_config_path=None, create_if_not_exists=False)`` returns the
process's PyTorch hook, creating it from the hook configuration file (see
:mod:`tornasole.hooks.config_paths`) when asked and when there is one;
``set_hook`` / ``del_hook`` replace and forget it.

Examples
--------
>>> import tornasole.pytorch as ts
>>> hook = ts.Hook("/tmp/run", save_config=ts.SaveConfig(save_interval=100), enabled=False)
>>> ts.del_hook(); ts.get_hook() is None
True
"""

from __future__ import annotations

from tornasole import modes
from tornasole.core.collection import Collection, CollectionKeys
from tornasole.core.reduction_config import ReductionConfig
from tornasole.core.save_config import SaveConfig, SaveConfigMode
from tornasole.hooks.singleton import framework_functions
from tornasole.hooks.stop_signal import TrainingStopRequested
from tornasole.pytorch.batch_record import record_batch
from tornasole.pytorch.hook import Hook
from tornasole.pytorch.llm_stats import save_attention_entropy, save_attention_logit_max, save_router_stats
from tornasole.pytorch.statistics import StatisticsConfig
from tornasole.trials import create_trial

get_hook, set_hook, del_hook = framework_functions(lambda: Hook)

__all__ = [
    "Hook",
    "StatisticsConfig",
    "SaveConfig",
    "SaveConfigMode",
    "ReductionConfig",
    "Collection",
    "CollectionKeys",
    "TrainingStopRequested",
    "create_trial",
    "get_hook",
    "set_hook",
    "del_hook",
    "modes",
    "save_router_stats",
    "save_attention_entropy",
    "save_attention_logit_max",
    "record_batch",
]

"""Model classes shared by the hook, the format layer and the readers.

Floor plan: imported by trials, hooks, the framework hooks and the evaluator; imports storage, config,
modes and exceptions only.

``SaveConfig`` / ``SaveConfigMode`` (when to save), ``ReductionConfig`` (what
to save of a tensor), ``Collection`` / ``CollectionKeys`` (named groups of
tensors) and ``CollectionManager``. They are plain values with
``to_json_dict`` / ``from_json_dict`` matching the collections file of
FORMAT.md 4; nothing here does I/O.

Examples
--------
>>> from tornasole.core import Collection, ReductionConfig, SaveConfig
>>> c = Collection("g", include_regex="^gradient", reduction_config=ReductionConfig(norms=["l2"]))
>>> c.to_json_dict()["reduction_config"]["reductions"]
'l2_norm'
"""

from __future__ import annotations

from tornasole.core.collection import Collection, CollectionKeys
from tornasole.core.collection_manager import CollectionManager
from tornasole.core.reduction_config import ReductionConfig
from tornasole.core.save_config import SaveConfig, SaveConfigMode

__all__ = [
    "Collection",
    "CollectionKeys",
    "CollectionManager",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
]

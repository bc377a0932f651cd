"""TensorFlow 2 support, under the names smdebug users know: ``KerasHook`` (also ``Hook``).

Floor plan: imported by training scripts only; imports keras.

One class serves ``model.fit`` (as a Keras callback) and custom training loops
(``hook.wrap_tape(tf.GradientTape())``, ``hook.save_tensor``, ``hook.set_mode``);
see :mod:`tornasole.keras.hook` and :mod:`tornasole.keras.tape`.

Examples
--------
>>> import tornasole.tensorflow as ts
>>> hook = ts.KerasHook("/tmp/run", save_config=ts.SaveConfig(save_interval=100), enabled=False)
"""

from __future__ import annotations

from tornasole.keras import (
    Collection,
    CollectionKeys,
    KerasHook,
    ReductionConfig,
    SaveConfig,
    SaveConfigMode,
    TrainingStopRequested,
    get_hook,
    modes,
    set_hook,
)

Hook = KerasHook

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

"""Trials written by ``tornasole.Hook`` (the numpy hook), as a training loop with validation writes them.

``epochs(path, train, evals)`` writes, per epoch, one TRAIN step per entry of ``train[e]`` and then one
EVAL step per entry of ``evals[e]``; each entry is ``{tensor name: value}`` (collections: ``weights/``,
``gradients/``, ``loss`` and ``*relu_output``/``*relu_input``/``*tanh_input`` by name). Every step is saved.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tornasole import Hook, SaveConfig, modes
from tornasole.trials import create_trial

_COLLECTIONS = (
    ("weights", "^weights/"),
    ("gradients", "^gradients/"),
    ("losses", "^loss"),
    ("relu_output", ".*relu_output"),
    ("relu_input", ".*relu_input"),
    ("activations", ".*(tanh|sigmoid)_input"),
)


def _collection_of(name: str) -> str:
    import re

    for coll, rx in _COLLECTIONS:
        if re.match(rx, name):
            return coll
    return "default"


def epochs(path: str, train: list[list[dict[str, Any]]], evals: list[list[dict[str, Any]]] | None = None):
    """Write the epochs with the numpy hook and open the trial."""
    evals = evals or [[] for _ in train]
    with Hook(path, save_config=SaveConfig(save_interval=1), stop_check_interval=None) as hook:
        for train_steps, eval_steps in zip(train, evals, strict=True):
            for mode, steps in ((modes.TRAIN, train_steps), (modes.EVAL, eval_steps)):
                if not steps:
                    continue
                hook.set_mode(mode)
                for tensors in steps:
                    for name, value in tensors.items():
                        hook.save_tensor(name, np.asarray(value, dtype=np.float32), _collection_of(name))
                    hook.next_step()
    return create_trial(path, collections_timeout=1.0, poll_interval=0.01)

"""Zero code change for Keras: the one hook a DebugHookConfig JSON file asks for, created on demand.

Where the file is: ``$TORNASOLE_CONFIG_FILE_PATH``, else ``$SMDEBUG_CONFIG_FILE_PATH``
(what smdebug scripts set), else SageMaker's ``/opt/ml/input/config/debughookconfig.json``.
Without a file there is no hook (``None``), so the same script runs unchanged
with or without debugging.
"""

from __future__ import annotations

import threading
from typing import Any

from tornasole.config import SMDEBUG_HOOK_CONFIG_PATH
from tornasole.hooks.config_paths import config_file_path

__all__ = ["get_hook", "set_hook", "config_file_path", "SMDEBUG_CONFIG_PATH"]

SMDEBUG_CONFIG_PATH = SMDEBUG_HOOK_CONFIG_PATH
_lock = threading.Lock()
_hook: Any = None


def get_hook(create_if_not_exists: bool = False) -> Any:
    """The process's Keras hook; with ``create_if_not_exists`` made from the JSON file when one exists.

    Examples
    --------
    >>> get_hook() is None or get_hook() is get_hook()
    True
    """
    global _hook
    with _lock:
        if _hook is None and create_if_not_exists:
            path = config_file_path()
            if path is not None:
                from tornasole.keras.hook import Hook

                _hook = Hook.create_from_json_file(path)
        return _hook


def set_hook(hook: Any) -> None:
    """Make ``hook`` the one :func:`get_hook` returns (``None`` forgets it)."""
    global _hook
    with _lock:
        _hook = hook

"""The process-wide hook that zero-code-change configurations create and scripts pick up.

smdebug's ``get_hook()`` lets a script say "give me the hook the job
configuration asks for" without building it itself: on SageMaker a
``DebugHookConfig`` file is present and the hook comes from it; elsewhere
there is none and ``get_hook()`` answers ``None`` (unless asked to create one).
Each framework module exposes ``get_hook`` / ``set_hook`` / ``del_hook``
bound to its hook class (:func:`framework_functions`), all sharing one
singleton per process, as smdebug does: a hook of another framework's class
is dropped when a different framework asks for its own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from tornasole.exceptions import ConfigurationError

__all__ = ["get_hook", "set_hook", "del_hook", "framework_functions"]

logger = logging.getLogger(__name__)

_lock = threading.RLock()
_hook: Any = None


def _hook_base() -> type:
    from tornasole.hooks.hook_base import HookBase

    return HookBase


def get_hook(
    hook_class: type | None = None, *, json_config_path: str | None = None, create_if_not_exists: bool = False
) -> Any:
    """The current hook if it is a ``hook_class``; else, when asked, one created from the JSON config.

    Parameters
    ----------
    hook_class : type, optional
        A hook class (a ``HookBase`` subclass). ``None`` returns the current hook whatever its class.
    json_config_path : str, optional
        The DebugHookConfig file to create from (default: the environment variables, then SageMaker's path).
    create_if_not_exists : bool
        Create the hook with ``hook_class.create_from_json_file`` when there is none. A missing
        configuration file then means no hook (``None``), as in smdebug; an invalid one raises.
        A file that was named (``json_config_path``, ``$TORNASOLE_CONFIG_FILE_PATH`` or
        ``$SMDEBUG_CONFIG_FILE_PATH``) and is missing is logged as a warning naming it: the run
        would otherwise save nothing without a word.

    Examples
    --------
    >>> from tornasole.hooks import Hook
    >>> del_hook(); get_hook(Hook) is None
    True
    >>> h = Hook(enabled=False); set_hook(h); get_hook(Hook) is h
    True
    >>> del_hook()
    """
    global _hook
    with _lock:
        if hook_class is None:
            if create_if_not_exists:
                raise ConfigurationError("get_hook: cannot create a hook without a hook class")
            return _hook
        if _hook is not None:
            if isinstance(_hook, hook_class):
                return _hook
            logger.info("the current hook is a %s, not a %s: dropping it", type(_hook).__name__, hook_class)
            _hook = None
        if create_if_not_exists:
            try:
                set_hook(hook_class.create_from_json_file(json_config_path))
            except FileNotFoundError as exc:
                if getattr(exc, "named", False):
                    logger.warning("%s: no hook created, so this run saves no tensors", exc)
                else:
                    logger.info("no hook configuration file (%s): no hook created", exc)
        return _hook


def set_hook(custom_hook: Any) -> None:
    """Make ``custom_hook`` the process's hook (what later ``get_hook`` calls return)."""
    global _hook
    if not isinstance(custom_hook, _hook_base()):
        raise ConfigurationError(f"set_hook: {custom_hook!r} is not a Tornasole hook")
    with _lock:
        _hook = custom_hook


def del_hook() -> None:
    """Forget the process's hook (it is not closed)."""
    global _hook
    with _lock:
        _hook = None


def framework_functions(
    load_hook_class: Callable[[], type],
) -> tuple[Callable[..., Any], Callable[[Any], None], Callable[[], None]]:
    """``(get_hook, set_hook, del_hook)`` with smdebug's framework signatures, bound to one hook class.

    ``load_hook_class`` is called on first use, so importing the framework
    module stays cheap. The returned ``get_hook(json_config_path=None,
    create_if_not_exists=False)`` is what ``smdebug.<framework>.get_hook`` is.
    """

    def framework_get_hook(json_config_path: str | None = None, create_if_not_exists: bool = False) -> Any:
        return get_hook(
            load_hook_class(), json_config_path=json_config_path, create_if_not_exists=create_if_not_exists
        )

    framework_get_hook.__doc__ = (
        "The process's hook of this framework; with ``create_if_not_exists=True`` one is created from\n"
        "the hook configuration file if there is one (else ``None``)."
    )
    return framework_get_hook, set_hook, del_hook

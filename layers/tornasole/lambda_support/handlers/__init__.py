"""The evaluator's Lambda handlers (and the rule sandbox's), inside the package so a wheel carries them.

``functions/<name>/handler.py`` (what the CDK app ships as each function's
asset) only re-exports ``handler`` from the module of the same name here; the
local mode imports these modules directly, so ``pip install 'tornasole[local]'``
runs the same code Lambda runs without a source checkout.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tornasole.stack_spec import FunctionSpec

__all__ = ["HANDLER_MODULES", "handler_module", "load_handler"]

# Function asset directory name (``stack_spec.FunctionSpec.asset_dir``'s last part) -> module here.
HANDLER_MODULES = {
    "on_object_created": f"{__name__}.on_object_created",
    "publish_events": f"{__name__}.publish_events",
    "scheduled_check": f"{__name__}.scheduled_check",
    "custom_rule": f"{__name__}.custom_rule",
    "sagemaker_state_change": f"{__name__}.sagemaker_state_change",
}


def handler_module(asset_dir: str) -> ModuleType:
    """The module behind ``functions/<name>`` (``asset_dir`` may be the full repo-relative path)."""
    name = asset_dir.rstrip("/").rsplit("/", 1)[-1]
    try:
        module_name = HANDLER_MODULES[name]
    except KeyError as exc:
        known = ", ".join(sorted(HANDLER_MODULES))
        raise KeyError(f"no handler module for function asset {asset_dir!r} (known: {known})") from exc
    return importlib.import_module(module_name)


# Per-module objects a handler builds once per cold start from the environment.
COLD_START_CACHES = ("evaluator", "publisher")


def load_handler(function: FunctionSpec | str) -> Callable[[dict[str, Any], Any], Any]:
    """The ``handler(event, context)`` callable Lambda invokes for a function (its spec or asset dir).

    Loading is a cold start: what the module built from an earlier environment (another local mode's
    bucket and table, in the same process) is dropped, as a new Lambda execution environment would.
    """
    asset_dir = function if isinstance(function, str) else function.asset_dir
    module = handler_module(asset_dir)
    for name in COLD_START_CACHES:
        cached = getattr(module, name, None)
        if cached is not None and hasattr(cached, "cache_clear"):
            cached.cache_clear()
    return module.handler

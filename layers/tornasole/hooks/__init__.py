"""The framework-agnostic hook and its parts (saving numpy values into an smdebug-format trial).

Examples
--------
>>> from tornasole.hooks import Hook, TrainingStopRequested
"""

from __future__ import annotations

from tornasole.hooks.hook import DISABLE_ENV, Hook
from tornasole.hooks.stop_signal import TrainingStopRequested

__all__ = ["Hook", "TrainingStopRequested", "DISABLE_ENV"]

"""smdebug's profiler analysis entry points: ``ProfilerTrial``, ``PandasFrame`` and ``TrainingJob``.

Floor plan: part of :mod:`tornasole.profiler`, over its ``readers``. pandas is needed by ``PandasFrame``
only and is imported when one is made (``pip install 'tornasole[notebook]'``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ProfilerTrial", "PandasFrame", "TrainingJob"]

_HOMES = {
    "ProfilerTrial": "tornasole.profiler.analysis.profiler_trial",
    "PandasFrame": "tornasole.profiler.analysis.pandas_frame",
    "TrainingJob": "tornasole.profiler.analysis.training_job",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tornasole.profiler.analysis' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(home), name)

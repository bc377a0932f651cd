"""Where smdebug's profiler-reading modules live in Tornasole (the alias's table for them).

smdebug spreads its profiler analysis API over ``smdebug.profiler.*``, ``smdebug.profiler.analysis.*``
and ``smdebug.trials.profiler_trial``; Tornasole keeps it in :mod:`tornasole.profiler.readers` and
:mod:`tornasole.profiler.analysis`. Two smdebug modules (``utils``, ``profiler_constants``) gather names
from several of ours: they are the small re-export modules beside this file.
"""

from __future__ import annotations

__all__ = ["PROFILER_READING_MODULES"]

_READERS = "tornasole.profiler.readers"
_ANALYSIS = "tornasole.profiler.analysis"

#: smdebug module name -> the Tornasole module that serves it under the alias.
PROFILER_READING_MODULES = {
    "smdebug.profiler.system_metrics_reader": f"{_READERS}.system_metrics",
    "smdebug.profiler.algorithm_metrics_reader": f"{_READERS}.algorithm_metrics",
    "smdebug.profiler.metrics_reader_base": f"{_READERS}.base",
    "smdebug.profiler.system_profiler_file_parser": f"{_READERS}.system_events",
    "smdebug.profiler.trace_event_file_parser": f"{_READERS}.trace_events",
    "smdebug.profiler.tf_profiler_parser": f"{_READERS}.trace_events",
    "smdebug.profiler.utils": "tornasole.compat.smdebug_profiler.utils",
    "smdebug.profiler.profiler_constants": "tornasole.compat.smdebug_profiler.profiler_constants",
    "smdebug.profiler.analysis": _ANALYSIS,
    "smdebug.profiler.analysis.utils": _ANALYSIS,
    "smdebug.profiler.analysis.utils.profiler_data_to_pandas": f"{_ANALYSIS}.pandas_frame",
    "smdebug.profiler.analysis.notebook_utils": _ANALYSIS,
    "smdebug.profiler.analysis.notebook_utils.training_job": f"{_ANALYSIS}.training_job",
    "smdebug.trials.profiler_trial": f"{_ANALYSIS}.profiler_trial",
}

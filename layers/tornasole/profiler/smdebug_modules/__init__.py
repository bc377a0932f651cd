"""Where smdebug's profiler-reading modules live in Tornasole (the alias's and rule loader's table).

smdebug spreads its profiler analysis API over ``smdebug.profiler.*``, ``smdebug.profiler.analysis.*``
and ``smdebug.trials.profiler_trial``; Tornasole keeps it in :mod:`tornasole.profiler.readers` and
:mod:`tornasole.profiler.analysis`. Two smdebug modules (``utils``, ``profiler_constants``) gather names
from several of ours: they are the small re-export modules beside this file. The table is here, in
the profiler's own package, so that the rule-file loader (:func:`tornasole.rules.loader.map_module_name`)
and the process-wide alias (which asks the loader) resolve the same names.
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
    "smdebug.profiler.utils": "tornasole.profiler.smdebug_modules.utils",
    "smdebug.profiler.profiler_constants": "tornasole.profiler.smdebug_modules.profiler_constants",
    "smdebug.profiler.analysis": _ANALYSIS,
    "smdebug.profiler.analysis.utils": _ANALYSIS,
    "smdebug.profiler.analysis.utils.profiler_data_to_pandas": f"{_ANALYSIS}.pandas_frame",
    "smdebug.profiler.analysis.notebook_utils": _ANALYSIS,
    "smdebug.profiler.analysis.notebook_utils.training_job": f"{_ANALYSIS}.training_job",
    "smdebug.trials.profiler_trial": f"{_ANALYSIS}.profiler_trial",
}

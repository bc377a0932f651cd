"""smdebug's profiler readers over a trial's ``profiler-output/``, local or on S3.

Floor plan: part of :mod:`tornasole.profiler`; imports its ``format`` (every byte is decoded there) and
:mod:`tornasole.storage` (every listing and read goes through it, so local and S3 are one code path).

The classes keep smdebug's names and signatures (``LocalSystemMetricsReader(path).get_events(start, end,
unit=TimeUnits.SECONDS)``), so notebooks written for SageMaker read Tornasole's and SageMaker's output alike.
"""

from __future__ import annotations

from tornasole.profiler.readers.algorithm_metrics import (
    AlgorithmMetricsReader,
    LocalAlgorithmMetricsReader,
    S3AlgorithmMetricsReader,
)
from tornasole.profiler.readers.base import MAX_FILE_BYTES, MetricsReaderBase
from tornasole.profiler.readers.system_events import ProfilerSystemEvent, ProfilerSystemEvents
from tornasole.profiler.readers.system_metrics import (
    LocalSystemMetricsReader,
    S3SystemMetricsReader,
    SystemMetricsReader,
)
from tornasole.profiler.readers.trace_events import SMProfilerEvents, TraceEvent, TraceEventParser
from tornasole.profiler.readers.units import TimeUnits

__all__ = [
    "MAX_FILE_BYTES",
    "MetricsReaderBase",
    "SystemMetricsReader",
    "LocalSystemMetricsReader",
    "S3SystemMetricsReader",
    "AlgorithmMetricsReader",
    "LocalAlgorithmMetricsReader",
    "S3AlgorithmMetricsReader",
    "ProfilerSystemEvent",
    "ProfilerSystemEvents",
    "TraceEvent",
    "TraceEventParser",
    "SMProfilerEvents",
    "TimeUnits",
]

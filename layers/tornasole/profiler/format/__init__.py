"""The bytes under a trial's ``profiler-output/``: file names, system-metric lines, trace events.

Pure encode/decode, as :mod:`tornasole.format` is for tensors: nothing here opens a file or a socket, so
the writer in the hook, the readers and the rules all agree on one definition of the format, which is
smdebug's (its ``SystemProfilerEventParser`` and ``TraceEventParser`` read what this writes).
"""

from __future__ import annotations

__all__ = ["paths", "system_records", "trace_events"]

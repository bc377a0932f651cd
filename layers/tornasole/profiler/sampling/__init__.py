"""What a hook runs to record ``profiler-output/``: the system sampler, step timing and their files.

Floor plan: below hooks (which start a :class:`~tornasole.profiler.sampling.recorder.Profiler` when
profiling is asked for), above :mod:`tornasole.profiler.format` (every byte written goes through it) and
:mod:`tornasole.storage` (local paths and ``s3://``). Modules:

- ``config``: :class:`ProfilerConfig` from the hook argument, ``$TORNASOLE_PROFILER``, SageMaker's
  ``profilerconfig.json`` or the SDK's payload;
- ``proc`` / ``gpu``: host metrics from ``/proc``, GPU metrics from NVML (optional);
- ``files``: rotating files put whole; ``recorder``: the thread; ``steps``: step and phase events.
"""

from __future__ import annotations

from tornasole.profiler.sampling.config import ProfilerConfig, resolve_profiler_config

__all__ = ["ProfilerConfig", "resolve_profiler_config"]

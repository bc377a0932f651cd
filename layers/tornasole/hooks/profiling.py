"""The profiler's glue in a hook: start it when asked for, time the steps, close it with the hook.

A mixin of :class:`~tornasole.hooks.numpy_hook.Hook` (it uses the hook's ``out_dir``, worker, mode and
step counters). Off unless asked for (:func:`~tornasole.profiler.sampling.config.resolve_profiler_config`).
When on, the :class:`~tornasole.profiler.sampling.recorder.Profiler` starts at the first step (once the
process knows its rank: a DDP job usually makes the hook before ``init_process_group`` may have run),
every step boundary the hook sees records the step's event, and framework hooks add their phases through
:meth:`_profile_phase`. Fail-open as the rest of the hook: a profiler that cannot start is logged once
and stays off.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from tornasole.profiler.format import paths
from tornasole.profiler.sampling.config import ProfilerConfig, resolve_profiler_config
from tornasole.profiler.sampling.steps import StepTimer, now_us

__all__ = ["HookProfiling"]

logger = logging.getLogger(__name__)


class HookProfiling:
    """Mixin: ``self.profiler_config`` (None: off), ``self._step_timer`` while the profiler runs."""

    #: Whether ``_begin_step`` times the steps (Keras and XGBoost time them in their own callbacks).
    _PROFILE_STEPS_IN_BASE = True

    def _init_profiling(self, argument: Any) -> None:
        config = resolve_profiler_config(argument) if self.enabled or argument is not None else None
        self.profiler_config: ProfilerConfig | None = config if self.enabled else None
        self._profiler: Any = None
        self._step_timer: StepTimer | None = None
        self._profiling_failed = False

    @property
    def profiler_recorder(self) -> Any:
        """The running :class:`~tornasole.profiler.sampling.recorder.Profiler`, or None (not ``profiler``:
        smdebug's TF2 hook has a ``profiler()`` context manager of that name)."""
        return self._profiler

    @property
    def profiler_output_path(self) -> str | None:
        """Where this hook's profiler files go (``<out_dir>/profiler-output`` unless configured), or None."""
        config = self.profiler_config
        if config is None:
            return None
        return (config.output_path or paths.profiler_root(self.out_dir)).rstrip("/")

    def _ensure_profiler(self) -> StepTimer | None:
        """The step timer, starting the profiler on first use; None when profiling is off or failed."""
        timer = self._step_timer
        if timer is not None or self.profiler_config is None or self._profiling_failed or self._closed:
            return timer
        try:
            timer = self._start_profiler()
        except Exception:  # noqa: BLE001 - fail-open: no profiler, training goes on
            self._profiling_failed = True
            logger.warning("Tornasole: the profiler could not start; training continues", exc_info=True)
            return None
        self._step_timer = timer
        return timer

    def _start_profiler(self) -> StepTimer:
        from tornasole.profiler.sampling.recorder import (
            Profiler,
            framework_node_name,
            system_node_name,
        )

        config = self.profiler_config
        root = self.profiler_output_path
        rank = self._worker_info().rank
        profiler = Profiler(
            config,
            root,
            self._profiler_storage(root),
            system_node=system_node_name(rank, os.environ),
            framework_node=framework_node_name(rank),
        )
        profiler.start()
        self._profiler = profiler
        return StepTimer(profiler.record)

    def _profiler_storage(self, root: str) -> Any:
        if self._storage_override is not None and root.startswith(self.out_dir + "/"):
            return self._storage_override
        from tornasole.storage.schemes import get_storage

        return get_storage(root)

    # -- called by the step machinery and the framework hooks -----------------------------------
    def _profile_step_begin(self, step_num: int | None = None) -> None:
        """A step opened: ``step_num`` in the current mode (default: what the hook's counters say)."""
        timer = self._step_timer or self._ensure_profiler()
        if timer is not None and self._profiler.active:
            timer.begin(self.mode.name, self.mode_step if step_num is None else step_num)

    def _profile_step_end(self) -> None:
        timer = self._step_timer
        if timer is not None:
            timer.end()

    def _profile_phase(self, phase: str, name: str, start_us: int, *, in_step: bool = True) -> int:
        """Record ``phase`` from ``start_us`` to now (framework hooks' forward, backward, optimizer...);
        returns now, in epoch microseconds."""
        end = now_us()
        timer = self._step_timer
        if timer is not None:
            timer.phase(phase, name, start_us, end, in_step=in_step)
        return end

    def _close_profiler(self) -> None:
        """End the open step's event and put every open profiler file (called by ``close``)."""
        timer, self._step_timer = self._step_timer, None
        profiler = self._profiler
        if profiler is None:
            return
        try:
            if timer is not None:
                timer.end()
        finally:
            profiler.close()

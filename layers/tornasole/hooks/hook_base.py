"""Step lifecycle, worker identity and the writer of a hook, shared by every framework.

:class:`~tornasole.hooks.numpy_hook.Hook` holds the public API; this mixin holds the
state machine behind it. Framework hooks override the capture methods
(``_capture``, ``_reduce``, ``_shape_of``, ``_numel``, ``_materializer``) and
the step callbacks (``_on_step_begin``, ``_on_step_end``, ``_on_close``).

A step is *open* between two step boundaries. Framework hooks start closed
(step -1) and open a step on each forward pass of the registered model; a value
saved while no step is open (before the first forward pass, or after
``set_mode``) joins the next step, with that step's mode.

A ``save_scalar`` value given at an open step that the save config does not
save is held (the latest per name) until the step ends: a normal step
boundary drops it, as sampling drops any unsaved value, but when the step is
the last of its mode (``set_mode`` or ``close`` ends it) it is written at that
step. Otherwise a metric given after the last saved step of a phase would
never be written; smdebug writes it (into a later step, FORMAT.md 7.4).

Capture on demand (``tornasole.hooks.capture_window``): a step that opens while a
rule's capture request is being served also saves the full tensors of the
requested collections, whatever the save config says about that step.
"""

from __future__ import annotations

import logging
import math
import os
import time
import weakref
from typing import Any

from tornasole import config
from tornasole.core.collection import Collection
from tornasole.core.reduction_config import ReductionConfig
from tornasole.core.save_config import SaveConfig
from tornasole.format.paths import STOP_SIGNAL
from tornasole.format.reductions import reduction_tag
from tornasole.hooks.capture_window import CaptureRequestPoller, CaptureWindow
from tornasole.hooks.save_manager import SaveManager, WritePlan
from tornasole.hooks.stop_signal import StopSignalPoller, TrainingStopRequested
from tornasole.hooks.uploader import AsyncTrialWriter, RetryingStorage, StepJob
from tornasole.hooks.workers import WorkerInfo, detect_worker
from tornasole.modes import ModeKeys
from tornasole.storage.paths import join

__all__ = ["HookBase", "DISABLE_ENV", "resolve_tensorboard_dir"]

logger = logging.getLogger(__name__)

# Set to 1/true/yes to turn every hook into a no-op without touching the training script.
DISABLE_ENV = config.HOOK_DISABLED


def _env_disabled() -> bool:
    return os.environ.get(DISABLE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def resolve_tensorboard_dir(
    export_tensorboard: bool, tensorboard_dir: str | None, out_dir: str
) -> str | None:
    """smdebug's rule: a given ``tensorboard_dir`` is used (even without ``export_tensorboard``);
    ``export_tensorboard`` alone means ``<out_dir>/tensorboard``; neither means no TensorBoard output."""
    if tensorboard_dir:
        tb = str(tensorboard_dir)
        return tb.rstrip("/") if tb.startswith("s3://") else os.path.expanduser(tb).rstrip("/")
    if export_tensorboard and out_dir:
        return join(out_dir, "tensorboard")
    return None


class HookBase:
    """State machine of a hook (see the module docstring); not used on its own."""

    _INIT_STEP = 0
    _OPEN_AT_START = True

    def _init_base(
        self, *, save_config: SaveConfig, reduction_config: ReductionConfig, include: list[str]
    ) -> None:
        self.save_config = save_config
        self.reduction_config = reduction_config
        self._saves = SaveManager(
            self.collection_manager,
            save_config=save_config,
            reduction_config=reduction_config,
            include_collections=include,
        )
        self.step = self._INIT_STEP
        self.mode = ModeKeys.GLOBAL
        self.mode_steps: dict[ModeKeys, int] = {ModeKeys.GLOBAL: self._INIT_STEP}
        self._open = self._OPEN_AT_START
        self._step_colls: tuple[Collection, ...] | None = None
        self._pending: list[tuple[Any, ...]] = []
        self._deferred: list[tuple[str, Any, float | None]] = []
        # scalars given at the open step while it saves none: name -> (captured value, wall time)
        self._held_scalars: dict[str, tuple[Any, float]] = {}
        self._writer: AsyncTrialWriter | None = None
        self._worker: WorkerInfo | None = None
        self._collections_written = False
        self._stop_raised = False
        self._saving = False  # the open step registered per-step framework hooks
        self._quiet_generation = -1  # the save settings a hook's quiet steps were worked out under
        self._capture_window = CaptureWindow()
        self._capture_poller: CaptureRequestPoller | None = None
        self._capturing = False  # the open step saves the full tensors a rule asked for

    # -- identity -----------------------------------------------------------------------------
    @property
    def mode_step(self) -> int:
        return self.mode_steps.get(self.mode, self._INIT_STEP)

    def _worker_info(self) -> WorkerInfo:
        if self._worker is None:
            self._worker = detect_worker()
        return self._worker

    @property
    def worker(self) -> str:
        """This process's worker name, ``worker_<rank>``."""
        return self._worker_info().name

    @property
    def num_workers(self) -> int:
        """Workers writing each step: the world size with ``include_workers="all"``, else 1."""
        return self._worker_info().world_size if self.include_workers == "all" else 1

    def _is_writer(self) -> bool:
        return self.include_workers == "all" or self._worker_info().is_chief

    @property
    def _writes(self) -> bool:
        """:meth:`_is_writer`, cached once the worker is known (read on every step)."""
        writes = self.__dict__.get("_writes_cached")
        if writes is None:
            writes = self._writes_cached = self._is_writer()
        return writes

    # -- steps that save nothing (the framework hooks' idle steps) -------------------------------
    def _next_saving_step(self, mode: ModeKeys, first: int) -> float:
        """The first step of ``mode`` from ``first`` on at which anything is saved (``math.inf``: none,
        or this worker writes nothing), under the save settings it records as the quiet generation."""
        saves = self._saves
        saves.prepare()
        self._quiet_generation = saves.generation
        return saves.next_saved_step(mode, first) if self._writes else math.inf

    def _still_quiet(self) -> bool:
        """Whether a step before :meth:`_next_saving_step`'s may only move the step counters.

        True while the save manager would not rebuild its settings (SaveManager.prepare's
        own test: no collection added, none invalidated or included) and has not rebuilt
        them since, and nothing waits to be saved, deferred, raised or closed.
        """
        saves = self._saves
        return (
            saves._generation == self._quiet_generation
            and saves._prepared_count == len(saves.collections.collections)
            and self._open
            and not (
                self._pending or self._deferred or self._held_scalars or self.raise_on_stop or self._closed
            )
            and not self._capture_due()
        )

    def _capture_due(self) -> bool:
        """A capture request waits to be taken, or one is being served."""
        poller = self._capture_poller
        return self._capture_window.active or (poller is not None and poller.has_pending)

    # -- steps --------------------------------------------------------------------------------
    def _current_step_colls(self) -> tuple[Collection, ...]:
        if self._step_colls is None:
            self._step_colls = (
                self._saves.collections_for_step(self.mode, self.mode_step) if self._is_writer() else ()
            )
        return self._step_colls

    def _begin_step(self) -> None:
        """End the open step (if any) and open the next one."""
        if self._closed:
            return
        if self._open and (self._pending or self._saving):
            self._end_step()
        if self._held_scalars:
            self._held_scalars = {}  # the step was not the last of its mode: sampled out
        if self.raise_on_stop and not self._stop_raised and self.stop_requested:
            self._stop_raised = True
            raise TrainingStopRequested(self._stop_poller.path, self.step)
        # the hot path: on most steps this is all that runs
        step = self.step = self.step + 1
        mode = self.mode
        mode_step = self.mode_steps[mode] = self.mode_steps.get(mode, self._INIT_STEP) + 1
        if mode is not ModeKeys.GLOBAL:
            self.mode_steps[ModeKeys.GLOBAL] = step
        self._open = True
        self._step_colls = colls = self._saves.collections_for_step(mode, mode_step) if self._writes else ()
        poller = self._capture_poller
        if poller is not None and poller.has_pending:
            self._take_capture_requests(poller)
        window = self._capture_window
        self._capturing = capturing = (
            window.remaining > 0 and self._writes and window.begin_step(mode, step, self.collection_manager)
        )
        if self._deferred:
            self._save_deferred()
        if colls or capturing:
            self._saving = True
            self._on_step_begin()
        if self.profiler_config is not None and self._PROFILE_STEPS_IN_BASE:
            self._profile_step_begin()

    def _switch_mode(self, mode: ModeKeys) -> None:
        if self._closed or mode == self.mode:
            self.mode = mode
            return
        self._write_held_scalars()
        self._profile_step_end()
        if self._OPEN_AT_START:
            if self._pending:
                self._begin_step()
        elif self._open:
            self._end_step()
            self._open = False
        self.mode = mode
        self.mode_steps.setdefault(mode, self._INIT_STEP)
        self._step_colls = None
        if self._OPEN_AT_START and self._writes:  # the open step is now of ``mode``: captured as one of it
            self._capturing = self._capture_window.retarget(
                self._capturing, mode, self.step, self.collection_manager
            )
        else:  # a framework hook ended its step: the next forward pass opens (and decides) the next
            self._capturing = False

    def _end_step(self) -> None:
        """Hand the step's records to the writer thread (nothing is written for an empty step)."""
        if self._closed:
            if self._deferred and not self._open:
                self._open_step_for_deferred()
            self._write_held_scalars()  # close() ends the last step of the mode
        self._saving = False
        self._on_step_end()
        if not self._pending or not self._is_writer():
            self._pending = []
            return
        records, self._pending = self._pending, []
        job = StepJob(
            step=max(self.step, 0),
            mode=self.mode,
            mode_step=max(self.mode_step, 0),
            worker=self.worker,
            records=records,
            materialize=self._materializer(),
        )
        self._get_writer().submit_step(job)
        if not self._collections_written:
            self._submit_collections()

    def _submit_collections(self) -> None:
        self._saves.prepare()
        self._collections_written = True
        self._get_writer().submit_collections(
            self.worker, self.collection_manager.to_json_dicts(), self.num_workers
        )

    # -- values -------------------------------------------------------------------------------
    def _save_named(self, name: str, value: Any, wall_time: float | None = None) -> None:
        if not self._open:
            self._deferred.append((name, self._capture(value), wall_time or time.time()))
            return
        plan = self._plan_for(name)
        if plan is not None:
            self._write_planned(name, value, plan, wall_time)

    def _plan_for(self, name: str) -> WritePlan | None:
        """What to write for ``name`` at the open step: its collections' plan, with the full tensor when a
        rule's capture request covers the step and the name's collection."""
        colls = self._current_step_colls()
        if not self._capturing:
            return self._saves.plan(name, colls, self.mode) if colls else None
        plan = self._saves.plan(name, colls, self.mode) if colls else None
        return self._capture_window.plan(name, plan)

    def _take_capture_requests(self, poller: CaptureRequestPoller) -> None:
        for request in poller.take():
            self._capture_window.add(request)

    def _save_deferred(self) -> None:
        """Save the values given while no step was open, into the step just opened."""
        deferred, self._deferred = self._deferred, []
        for name, value, wall_time in deferred:
            if name.startswith("scalar/"):
                self._save_scalar_named(name, value, wall_time)
            else:
                self._save_named(name, value, wall_time)

    def _open_step_for_deferred(self) -> None:
        """At close, values given after the last step ended (``set_mode`` then ``save_scalar``) join the
        step that would have come next, as they would have at the next forward pass; that step is the last
        of its mode, so its scalars are written whatever the save config (smdebug writes them too)."""
        step = self.step = self.step + 1
        mode = self.mode
        self.mode_steps[mode] = self.mode_steps.get(mode, self._INIT_STEP) + 1
        if mode is not ModeKeys.GLOBAL:
            self.mode_steps[ModeKeys.GLOBAL] = step
        self._open = True
        self._step_colls = None
        self._save_deferred()

    def _save_scalar_named(self, name: str, value: Any, wall_time: float | None) -> None:
        """Save a ``save_scalar`` value; held at an open step that saves none (module docstring)."""
        if self._open and self._saves.plan(name, self._current_step_colls(), self.mode) is None:
            self._held_scalars[name] = (value, wall_time or time.time())
            return
        self._save_named(name, value, wall_time)

    def _write_held_scalars(self) -> None:
        """Write the held scalars at the open step, as if every saved collection were saved at it."""
        if not self._held_scalars:
            return
        held, self._held_scalars = self._held_scalars, {}
        if not self._open or not self._writes:
            return
        saved = self._saves.saved_collections
        for name, (value, wall_time) in held.items():
            plan = self._saves.plan(name, saved, self.mode)
            if plan is not None:
                self._write_planned(name, value, plan, wall_time)

    def _write_planned(self, name: str, value: Any, plan: WritePlan, wall_time: float | None = None) -> None:
        if self._numel(value) == 0:
            return  # smdebug's reader cannot read size-0 tensors; its hooks never write them
        now = wall_time or time.time()
        pending = self._pending
        tb = self._tb_enabled
        if plan.save_shape:
            pending.append(("s", name, self._shape_of(value)))
        for reduction, abs_ in plan.reductions:
            tag = reduction_tag(name, reduction, abs_)
            reduced = self._reduce(value, reduction, abs_)
            pending.append(("t", tag, reduced, now))
            if tb:
                pending.append(("tb_scalar", tag, reduced, now))
        captured = None
        if plan.save_raw:
            captured = self._capture(value)
            pending.append(("t", name, captured, now))
        if tb and (plan.histogram_of or plan.scalar_summary):
            # TensorBoard only: summaries of the value, written next to (never into) the step's event file
            captured = self._capture(value) if captured is None else captured
            if plan.histogram_of:
                pending.append(("tb_histogram", f"{plan.histogram_of}/{name}", captured, now))
            if plan.scalar_summary:
                pending.append(("tb_scalar", name, captured, now))

    @staticmethod
    def _numel(value: Any) -> int:
        return int(getattr(value, "size", 1)) if not callable(getattr(value, "size", None)) else value.numel()

    def _materializer(self) -> Any:
        return None

    # -- framework callbacks (no-ops here) ----------------------------------------------------
    def _on_step_begin(self) -> None:
        """Called when a step that saves something opens (framework hooks capture parameters)."""

    def _on_step_end(self) -> None:
        """Called before a step's records go to the writer (framework hooks remove per-step hooks)."""

    def _on_close(self) -> None:
        """Called last by ``close()``."""

    # -- writer and stop signal ---------------------------------------------------------------
    def _storage(self) -> Any:
        if self._storage_override is not None:
            return self._storage_override
        from tornasole.storage.schemes import get_storage

        return get_storage(self.out_dir)

    def _get_writer(self) -> AsyncTrialWriter:
        if self._writer is None:
            max_queue, attempts, base_delay = self._writer_options
            from tornasole.hooks.lifecycle import warn_if_finished_trial

            if self.out_dir:  # once per hook: the writer is made once
                warn_if_finished_trial(self._storage(), self.out_dir)
            storage = RetryingStorage(self._storage(), attempts=attempts, base_delay=base_delay)
            self._writer = AsyncTrialWriter(
                self.out_dir, storage, max_queue=max_queue, tensorboard=self._tensorboard_writer(storage)
            )
        return self._writer

    def _tensorboard_writer(self, trial_storage: Any) -> Any:
        tb_dir = getattr(self, "tensorboard_dir", None)
        if not tb_dir:
            return None
        from tornasole.tensorboard import TensorBoardWriter

        if self._storage_override is not None and tb_dir.startswith(self.out_dir + "/"):
            storage = trial_storage
        else:
            from tornasole.storage.schemes import get_storage

            _, attempts, base_delay = self._writer_options
            storage = RetryingStorage(get_storage(tb_dir), attempts=attempts, base_delay=base_delay)
        return TensorBoardWriter(tb_dir, storage)

    @property
    def _tb_enabled(self) -> bool:
        return bool(getattr(self, "tensorboard_dir", None))

    def _start_capture_poller(self, interval: float | None) -> None:
        if interval:
            self._capture_poller = CaptureRequestPoller(self._storage(), self.out_dir, interval)
            self._capture_poller.start()

    def _start_stop_poller(self, interval: float | None) -> None:
        if interval:
            self._stop_poller = StopSignalPoller(self._storage(), join(self.out_dir, STOP_SIGNAL), interval)
            self._stop_poller.start()


def _close_at_exit(ref: weakref.ref) -> None:
    hook = ref()
    if hook is not None:
        try:
            hook.close()
        except Exception:  # noqa: BLE001 - never fail interpreter shutdown
            logger.exception("Tornasole: closing the hook at exit failed")

"""The framework-agnostic hook: numpy values in, an smdebug-format trial out.

Step model. The hook always has a *current step* (global step, mode, mode
step). Values given to :meth:`Hook.save_tensor` / :meth:`Hook.save_scalar`
belong to the current step and are written with its step, mode and mode step:
never cached into a later step or another mode (smdebug's fault, FORMAT.md
7.4). :meth:`Hook.next_step` ends the step; framework hooks end it on the next
forward pass instead. :meth:`Hook.set_mode` ends a step that already saved
something, since one step file holds one mode.

Cost model. A step that saves nothing costs a dictionary lookup. A saved
step's values are copied on the training thread (cheap) and everything else,
reductions of framework tensors aside, happens on one background writer
thread (:mod:`tornasole.hooks.uploader`): encoding, local atomic writes, S3
uploads with retries. ``close()`` drains that thread, writes the collections
file if it was not written yet, then the end marker (not on SageMaker itself, detected by what
SageMaker provides, not by ``TRAINING_JOB_NAME`` alone: ``tornasole.hooks.lifecycle``).
"""

from __future__ import annotations

import atexit
import logging
import weakref
from typing import Any

import numpy as np

from tornasole.core.collection import Collection, CollectionKeys
from tornasole.core.collection_manager import CollectionManager
from tornasole.core.reduction_config import ReductionConfig
from tornasole.core.save_config import SaveConfig
from tornasole.exceptions import ConfigurationError
from tornasole.hooks.capture_window import DEFAULT_CAPTURE_CHECK_INTERVAL
from tornasole.hooks.hook_base import (
    DISABLE_ENV,
    HookBase,
    _close_at_exit,
    _env_disabled,
    resolve_tensorboard_dir,
)
from tornasole.hooks.lifecycle import running_on_sagemaker
from tornasole.hooks.profiling import HookProfiling
from tornasole.hooks.smdebug_methods import SmdebugHookMethods
from tornasole.hooks.stop_signal import DEFAULT_STOP_CHECK_INTERVAL
from tornasole.modes import ModeKeys

__all__ = ["Hook", "DISABLE_ENV"]

logger = logging.getLogger(__name__)


class Hook(SmdebugHookMethods, HookProfiling, HookBase):
    """Save numpy values (and scalars) from any training loop.

    Parameters
    ----------
    out_dir : str
        Local directory or ``s3://bucket/prefix`` (the trial directory).
    export_tensorboard : bool
        Also write TensorBoard summaries (to ``tensorboard_dir``, default ``<out_dir>/tensorboard``).
    tensorboard_dir : str, optional
        Where TensorBoard event files go (giving it turns them on, as in smdebug).
    dry_run : bool
        Write nothing (the hook is disabled), as smdebug's ``dry_run``.
    save_config : SaveConfig or SaveConfigMode, optional
        Default save settings (every 500 steps).
    reduction_config : ReductionConfig, optional
        Default for collections without their own (full tensor).
    include_regex : str or list of str, optional
        Tensors matching these are saved in the ``default`` collection.
    include_collections : list of str, optional
        Collections to save, besides ``losses``; ``"all"`` saves every collection.
    save_all : bool
        Save every tensor (collection ``all`` with ``.*``).
    include_workers : {"one", "all"}
        Only the chief (rank 0) writes, or every worker does.
    enabled : bool, optional
        ``False`` makes every call a no-op; default: on unless ``TORNASOLE_HOOK_DISABLED`` is set.
    raise_on_stop : bool
        Raise :class:`~tornasole.hooks.TrainingStopRequested` at the next step
        boundary once a rule asked the job to stop.
    stop_check_interval : float or None
        Seconds between checks for the stop marker (default 0.5: ``stop_requested`` within 1 s of the
        rule's verdict), made on a background thread; ``None`` or 0 disables them.
    capture_check_interval : float or None
        Seconds between checks for a rule's capture request (default 2; ``None`` or 0 disables them):
        the full tensors of the requested collections are then saved for the requested number of
        training steps, on top of the save config (docs/RULES.md "Actions", ``capture``).
    storage : Storage, optional
        Backend to write through (default: chosen from ``out_dir``).
    profiler : ProfilerConfig, bool or dict, optional
        Record system and framework metrics under ``<out_dir>/profiler-output`` (docs/PROFILER.md);
        default: off, unless ``$TORNASOLE_PROFILER`` or SageMaker's ``profilerconfig.json`` asks for it.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from tornasole import Hook, SaveConfig, modes
    >>> with Hook(tempfile.mkdtemp(), save_config=SaveConfig(save_interval=2)) as hook:
    ...     hook.set_mode(modes.TRAIN)
    ...     for step in range(4):
    ...         hook.save_tensor("w", np.full(3, step, dtype=np.float32))
    ...         hook.save_scalar("lr", 0.1)
    ...         hook.next_step()
    """

    _INIT_STEP = 0
    _OPEN_AT_START = True
    _DEFAULT_INCLUDE = (CollectionKeys.LOSSES,)

    def __init__(
        self,
        out_dir: str | None = None,
        export_tensorboard: bool = False,
        tensorboard_dir: str | None = None,
        dry_run: bool = False,
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | Any = None,
        include_regex: str | list[str] | None = None,
        include_collections: list[str] | None = None,
        save_all: bool = False,
        include_workers: str = "one",
        *,
        enabled: bool | None = None,
        raise_on_stop: bool = False,
        stop_check_interval: float | None = DEFAULT_STOP_CHECK_INTERVAL,
        capture_check_interval: float | None = DEFAULT_CAPTURE_CHECK_INTERVAL,
        storage: Any = None,
        max_queue_steps: int = 16,
        retry_attempts: int = 5,
        retry_base_delay: float = 0.2,
        profiler: Any = None,
    ) -> None:
        self.enabled = (not _env_disabled()) if enabled is None else bool(enabled)
        self.dry_run = bool(dry_run)
        if self.dry_run and self.enabled:
            logger.info("Tornasole: dry_run is set, the hook writes nothing")
            self.enabled = False
        if include_workers not in ("one", "all"):
            raise ConfigurationError(f"include_workers={include_workers!r} must be 'one' or 'all'")
        if self.enabled and not out_dir:
            raise ConfigurationError("Hook: out_dir is required (a local path or s3://bucket/prefix)")
        self.out_dir = str(out_dir).rstrip("/") if out_dir else ""
        self.tensorboard_dir = resolve_tensorboard_dir(export_tensorboard, tensorboard_dir, self.out_dir)
        self.include_workers = include_workers
        self.save_all = bool(save_all)
        self.collection_manager = self._default_collections()
        include = list(self._DEFAULT_INCLUDE) + list(include_collections or [])
        if include_regex:
            self.collection_manager.get(CollectionKeys.DEFAULT).include(include_regex)
            include.append(CollectionKeys.DEFAULT)
        if save_all:
            self.collection_manager.get(CollectionKeys.ALL).include(".*")
            include.append(CollectionKeys.ALL)
        self._init_base(
            save_config=SaveConfig.parse(save_config),
            reduction_config=reduction_config or ReductionConfig(save_raw_tensor=True),
            include=include,
        )
        self.raise_on_stop = raise_on_stop
        self._storage_override = storage
        self._writer_options = (max_queue_steps, retry_attempts, retry_base_delay)
        self._closed = not self.enabled
        self._stop_poller = None
        self._init_profiling(profiler)
        if self.enabled:
            self._start_stop_poller(stop_check_interval)
            self._start_capture_poller(capture_check_interval)
            atexit.register(_close_at_exit, weakref.ref(self))
            if self._OPEN_AT_START and self.profiler_config is not None:
                self._profile_step_begin()  # the numpy hook's first step is open from the start

    @classmethod
    def create_from_json_file(
        cls, path: str | None = None, *, json_file_path: str | None = None, **overrides: Any
    ) -> Hook:
        """A hook configured by a SageMaker DebugHookConfig JSON file (:mod:`tornasole.hooks.json_config`).

        ``path`` (smdebug's keyword ``json_file_path`` works too) defaults to
        ``$TORNASOLE_CONFIG_FILE_PATH``, then ``$SMDEBUG_CONFIG_FILE_PATH``, then SageMaker's
        ``/opt/ml/input/config/debughookconfig.json`` (a missing file raises
        :class:`~tornasole.hooks.config_paths.HookConfigNotFound` naming them);
        ``overrides`` go to the constructor.

        Examples
        --------
        >>> import json, tempfile
        >>> f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        >>> json.dump({"LocalPath": tempfile.mkdtemp(), "HookParameters": {"save_interval": "10"}}, f)
        >>> f.close()
        >>> Hook.create_from_json_file(f.name, enabled=False).save_config.get_save_config(ModeKeys.TRAIN)
        SaveConfigMode(save_interval=10, start_step=0, end_step=None, save_steps=[])
        """
        from tornasole.hooks.json_config import apply_collection_configs, load_hook_config

        cfg = load_hook_config(path or json_file_path)
        hook = cls(cfg.out_dir, **{**cfg.hook_kwargs, **overrides})
        apply_collection_configs(hook, cfg)
        return hook

    # -- collections --------------------------------------------------------------------------
    def _default_collections(self) -> CollectionManager:
        return CollectionManager.pytorch_defaults()

    def get_collection(self, name: str, create: bool = True) -> Collection:
        """The collection ``name`` (created if missing); edits before the first saved step apply."""
        coll = self.collection_manager.get(name, create=create)
        self._collections_changed()
        return coll

    def get_collections(self) -> dict[str, Collection]:
        """The ``name -> Collection`` mapping (smdebug returns the manager's own dict; so does this)."""
        self._collections_changed()
        return self.collection_manager.get_collections()

    def add_collection(self, collection: Collection) -> None:
        """Add (or replace by name) a collection."""
        self.collection_manager.add(collection)
        self._collections_changed()

    def _collections_changed(self) -> None:
        self._saves.invalidate()
        self._step_colls = None

    # -- public saving API --------------------------------------------------------------------
    def save_tensor(
        self, tensor_name: str, tensor_value: Any, collections_to_write: str | list[str] = "default"
    ):
        """Save ``tensor_value`` at the current step if one of its collections is saved at this step.

        The named collections get ``tensor_name`` and are saved from now on.
        """
        if self._closed or not self._is_writer():
            return
        names = (
            [collections_to_write] if isinstance(collections_to_write, str) else list(collections_to_write)
        )
        for cname in names:
            coll = self.collection_manager.get(cname)
            if tensor_name not in coll.tensor_names:
                coll.add_tensor_name(tensor_name)
                self._collections_changed()
            if cname not in self._saves.include_collections:
                self._saves.include(cname)
                self._step_colls = None
        self._save_named(tensor_name, tensor_value)

    def save_scalar(
        self, name: str, value: Any, sm_metric: bool = False, timestamp: float | None = None
    ) -> None:
        """Save a scalar as ``scalar/<name>`` with the current step and mode (collection ``scalars``).

        Written when the ``scalars`` collection is saved at the current step (the
        hook's save config unless given its own, e.g. ``SaveConfig(save_interval=1)``
        for every step), and at the last step of a mode whatever the save config
        (``set_mode`` or ``close`` ends it: a metric given after the last saved
        step is not lost); never cached into a later step or another mode.
        """
        if self._closed or not self._is_writer():
            return
        arr = self._capture_scalar(value)
        if CollectionKeys.SCALARS not in self._saves.include_collections:
            self._saves.include(CollectionKeys.SCALARS)
            self._step_colls = None
        self._save_scalar_named("scalar/" + name, arr, timestamp)

    def set_mode(self, mode: ModeKeys) -> None:
        """Switch mode (TRAIN, EVAL, PREDICT, GLOBAL); ends the current step if it saved anything."""
        if not isinstance(mode, ModeKeys):
            raise ConfigurationError(f"invalid mode {mode!r}; expected one of {[m.name for m in ModeKeys]}")
        self._switch_mode(mode)

    def next_step(self) -> None:
        """End the current step and start the next one (framework hooks do this on each forward)."""
        self._begin_step()

    @property
    def stop_requested(self) -> bool:
        """Whether a rule asked this job to stop (the stop marker was seen next to the output)."""
        return self._stop_poller is not None and self._stop_poller.requested

    def flush(self) -> None:
        """Block until every step ended so far is written (the current step is not ended)."""
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        """End the current step, drain the writer, write collections if needed, then the end marker."""
        if self._closed:
            return
        self._closed = True
        try:
            self._end_step()
            if self._is_writer() and not self._collections_written:
                self._submit_collections()
            if self._writer is not None or self._is_writer():
                marker = None if running_on_sagemaker() else self._worker_info().name
                self._get_writer().close(end_marker_worker=marker)
        finally:
            if self._stop_poller is not None:
                self._stop_poller.close()
            if self._capture_poller is not None:
                self._capture_poller.close()
            try:
                self._on_close()
            finally:
                self._close_profiler()

    def __enter__(self) -> Hook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- numpy values (framework hooks override) ----------------------------------------------
    def _capture(self, value: Any) -> np.ndarray:
        if isinstance(value, np.ndarray):
            return value.copy()
        if np.isscalar(value):
            return np.array([value])
        return np.array(value)

    def _capture_scalar(self, value: Any) -> Any:
        arr = self._capture(value)
        if arr.size != 1:
            raise ConfigurationError(f"save_scalar: value of shape {arr.shape} is not a scalar")
        return arr

    def _reduce(self, value: np.ndarray, reduction: str, abs_: bool) -> np.ndarray:
        from tornasole.format.reductions import compute

        return np.asarray(compute(value, reduction, abs_)).reshape(1)

    @staticmethod
    def _shape_of(value: Any) -> tuple[int, ...]:
        return tuple(int(d) for d in value.shape)

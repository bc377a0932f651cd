"""The Keras 3 hook: a ``keras.callbacks.Callback`` for ``fit``, ``evaluate`` and ``predict``.

Steps and modes. Each batch of ``fit`` is a TRAIN step, each batch of
``evaluate`` (and of ``fit``'s validation) an EVAL step, each batch of
``predict`` a PREDICT step; the global step counts them all from 0, as
smdebug's Keras hook does. A step that saves nothing moves the step counters
in ``on_*_batch_begin`` (after an inline check that the save settings have not
changed since the hook worked out the next step that saves) and checks one
attribute in ``on_*_batch_end``; in ``fit`` it runs a trace of the train step
without taps (:meth:`TapsMixin._make_train_variants`).

Names (collection in brackets):

* ``weights/<variable path>`` (weights, or biases when the path ends in
  ``bias``, or ``beta``, a BatchNormalization's bias): read after the step, i.e. after the optimizer's update;
* ``gradients/<variable path>Grad`` (gradients): the gradients of the step's
  own tape, tapped inside the compiled train step (:mod:`tornasole.keras.capture`);
* ``optimizer_variables/<variable path>`` (optimizer_variables), after the step;
* ``scalar/lr/0`` (scalars): the learning rate the step's update uses, read when a TRAIN step that saves
  the ``scalars`` collection opens (the PyTorch hook's name: :mod:`tornasole.keras.learning_rate`);
* ``loss`` (losses) and every other key of the batch logs (metrics), e.g.
  ``mae``; Keras reports running means over the epoch, as they appear in the logs;
* at the end of each epoch of ``fit``, whatever the save interval, the epoch's
  logs: ``loss`` and the metrics in its last TRAIN step, ``val_loss`` (losses),
  ``val_mae`` ... (metrics) in its last validation step (EVAL)
  (:meth:`Hook._save_epoch_logs`);
* ``<layer name>/inputs`` and ``<layer name>/outputs`` (inputs, outputs, or any
  collection whose regex matches them, e.g. ``include_regex="dense_1"``);
* ``predictions`` and ``labels`` (outputs, as smdebug names them; ``_<i>`` per output of a model with
  several) and ``batch_loss/<Kind>``, the batch's own compiled loss named after its kind (any collection
  whose regex matches it): what the compiled loss is given and returns, in TRAIN and EVAL steps
  (:mod:`tornasole.keras.loss_tap`); in PREDICT steps ``predictions`` are the model's outputs that
  ``predict`` hands to its callbacks (no loss is computed there, so no ``labels``);
* ``inputs`` (``inputs_<i>`` per input of a model with several; collection inputs, smdebug's name): what
  the model is fed, in every mode (:mod:`tornasole.keras.input_tap`).

Backends (what is tested): TensorFlow supports every collection above. On
PyTorch the hook is a plain callback and saves weights, biases, optimizer
variables, losses and metrics (tested); gradients and layer inputs/outputs need
the TensorFlow taps and are skipped with one warning. JAX is untested (the
same plain-callback path applies).

When a rule's ``stoptraining`` action asks the job to stop, the hook sets
``model.stop_training`` after the current batch, so ``fit`` ends as with
Keras's own ``EarlyStopping`` (with ``raise_on_stop=True`` it raises instead).

The same class serves TensorFlow 2 custom training loops: :meth:`Hook.wrap_tape`
(see :mod:`tornasole.keras.tape`), ``save_tensor``, ``save_scalar`` and ``set_mode``.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

import keras
import numpy as np

from tornasole.core.collection import CollectionKeys
from tornasole.core.collection_manager import CollectionManager
from tornasole.format.reductions import reduction_tag
from tornasole.hooks.config_paths import config_file_path
from tornasole.hooks.numpy_hook import Hook as _CoreHook
from tornasole.hooks.stop_signal import TrainingStopRequested
from tornasole.hooks.workers import WorkerInfo
from tornasole.keras.capture import read_numpy, to_numpy, variable_name
from tornasole.keras.default_collections import keras_collections
from tornasole.keras.learning_rate import LEARNING_RATE_NAME, current_learning_rate
from tornasole.keras.loss_tap import PREDICTIONS, output_names
from tornasole.keras.taps import TapsMixin
from tornasole.modes import ModeKeys

if TYPE_CHECKING:
    from tornasole.keras.capture import GradientTap, LayerTap
    from tornasole.keras.input_tap import ModelInputTap
    from tornasole.keras.loss_tap import LossTap

__all__ = ["Hook", "keras_collections"]

logger = logging.getLogger(__name__)

_TRAIN, _EVAL, _PREDICT, _GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT, ModeKeys.GLOBAL

_MAKERS = {
    ModeKeys.TRAIN: "make_train_function",
    ModeKeys.EVAL: "make_test_function",
    ModeKeys.PREDICT: "make_predict_function",
}


class Hook(TapsMixin, _CoreHook, keras.callbacks.Callback):
    """Save tensors of a Keras 3 model from ``fit``/``evaluate``/``predict``; same arguments as
    :class:`tornasole.Hook` (default collections saved: ``losses`` and ``metrics``).

    Examples
    --------
    >>> import tempfile, numpy as np, keras
    >>> from tornasole.keras import Hook, SaveConfig
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> hook = Hook(tempfile.mkdtemp(), save_config=SaveConfig(save_interval=1),
    ...             include_collections=["weights", "gradients"])
    >>> _ = model.fit(np.ones((8, 4)), np.ones((8, 1)), batch_size=4, verbose=0, callbacks=[hook])
    >>> hook.close()
    """

    _INIT_STEP = -1
    _OPEN_AT_START = False
    _PROFILE_STEPS_IN_BASE = False  # a step's time is from the batch's begin to its end callback
    _DEFAULT_INCLUDE = (CollectionKeys.LOSSES, CollectionKeys.METRICS)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        keras.callbacks.Callback.__init__(self)
        _CoreHook.__init__(self, *args, **kwargs)
        self._flag: Any = None
        self._flag_on = False
        self._switch: Any = None  # TapSwitch, with the flag
        self._train_variants: tuple[Any, Any] | None = None  # fit's train function: taps on, taps off
        self._grad_tap: GradientTap | None = None
        self._layer_taps: list[LayerTap] = []
        self._loss_tap: LossTap | None = None
        self._input_tap: ModelInputTap | None = None
        self._io_values: list[tuple[str, np.ndarray]] = []
        self._fresh: np.ndarray | None = None
        self._tapped_model: Any = None
        self._registered_model: Any = None
        self._optimizer: Any = None
        self._tape: Any = None
        self._warned_backend = False
        self._stop_seen = False
        self._broken = False
        # Steps of _quiet_mode before mode step _quiet_until save nothing (HookBase._next_saving_step):
        # their batch callbacks only move the counters.
        self._quiet_mode: ModeKeys | None = None
        self._quiet_until = 0.0
        self._in_epoch = False  # between fit's on_epoch_begin and on_epoch_end
        self._held_for_epoch = False  # fit's validation ended with its last step kept open
        self._last_train_logs: Any = None

    @classmethod
    def create_from_json_file(
        cls, path: str | None = None, *, json_file_path: str | None = None, **overrides: Any
    ) -> Hook:
        """A hook configured by a DebugHookConfig JSON file (zero code change).

        The file: ``path``, else ``$TORNASOLE_CONFIG_FILE_PATH``, ``$SMDEBUG_CONFIG_FILE_PATH``,
        SageMaker's ``/opt/ml/input/config/debughookconfig.json``.
        """
        return super().create_from_json_file(path or json_file_path or config_file_path(), **overrides)

    def _default_collections(self) -> CollectionManager:
        return keras_collections()

    def _worker_info(self) -> WorkerInfo:
        if self._worker is None:
            from tornasole.keras.workers import detect_keras_worker

            self._worker = detect_keras_worker()
        return self._worker

    # -- registration (custom loops) ----------------------------------------------------------
    def register_model(self, model: Any) -> None:
        """Use ``model``'s weights, optimizer variables and layer taps in a custom training loop."""
        self._registered_model = model
        if getattr(model, "optimizer", None) is not None:
            self._optimizer = model.optimizer

    def wrap_optimizer(self, optimizer: Any) -> Any:
        """Save ``optimizer``'s variables (collection ``optimizer_variables``); returns it unchanged."""
        self._optimizer = optimizer
        return optimizer

    def wrap_tape(self, tape: Any) -> Any:
        """A tape that opens a TRAIN step on ``with``; ``gradient`` saves gradients, weights, loss."""
        from tornasole.keras.tape import WrappedTape

        if self.mode is not ModeKeys.TRAIN:
            self.set_mode(ModeKeys.TRAIN)
        self._tape = WrappedTape(self, tape)
        return self._tape

    # -- Keras callbacks ----------------------------------------------------------------------
    def on_train_begin(self, logs: Any = None) -> None:
        self._in_epoch = False
        self._guard(self._phase_begin, ModeKeys.TRAIN)

    def on_test_begin(self, logs: Any = None) -> None:
        if self._in_epoch:  # fit's validation
            self._guard(self._validation_begin)
        else:
            self._guard(self._phase_begin, ModeKeys.EVAL)

    def on_predict_begin(self, logs: Any = None) -> None:
        self._guard(self._phase_begin, ModeKeys.PREDICT)

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        if self._quiet_mode is not _TRAIN or not self._quiet_step():
            self._guard(self._batch_begin, _TRAIN)
        if self.profiler_config is not None:
            self._guard(self._profile_step_begin)

    def on_test_batch_begin(self, batch: int, logs: Any = None) -> None:
        if self._quiet_mode is not _EVAL or not self._quiet_step():
            self._guard(self._batch_begin, _EVAL)
        if self.profiler_config is not None:
            self._guard(self._profile_step_begin)

    def on_predict_batch_begin(self, batch: int, logs: Any = None) -> None:
        if self._quiet_mode is not _PREDICT or not self._quiet_step():
            self._guard(self._batch_begin, _PREDICT)
        if self.profiler_config is not None:
            self._guard(self._profile_step_begin)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if self._step_timer is not None:
            self._step_timer.end()
        self._last_train_logs = logs  # the epoch's training logs once it ends (Keras 3: running means)
        if self._saving:
            self._guard(self._batch_end, logs)
        if self._stop_poller is not None and self._stop_poller.requested and not self._stop_seen:
            self._stop_seen = True  # a rule asked the job to stop: end fit the Keras way, gracefully
            logger.warning("Tornasole: a rule asked this job to stop; setting model.stop_training")
            if self.model is not None:
                self.model.stop_training = True

    def on_test_batch_end(self, batch: int, logs: Any = None) -> None:
        if self._step_timer is not None:
            self._step_timer.end()
        if self._saving:
            self._guard(self._batch_end, logs)

    def on_predict_batch_end(self, batch: int, logs: Any = None) -> None:
        if self._step_timer is not None:
            self._step_timer.end()
        if self._saving:
            self._guard(self._predict_batch_end, logs)

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self._in_epoch = True
        self._last_train_logs = None

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self._in_epoch = False
        self._guard(self._epoch_end, logs)

    def on_train_end(self, logs: Any = None) -> None:
        self._in_epoch = False  # also after a fit that stopped inside an epoch
        self._guard(self._phase_end)

    def on_test_end(self, logs: Any = None) -> None:
        if self._in_epoch:  # fit's validation: its last step stays open for the epoch's logs
            self._guard(self._validation_end)
        else:
            self._guard(self._phase_end)

    def on_predict_end(self, logs: Any = None) -> None:
        self._guard(self._phase_end)

    def _guard(self, fn: Any, *args: Any) -> None:
        """Run a callback body; a hook bug is logged once and turns the hook off, training goes on."""
        if self._closed or self._broken:
            return
        try:
            fn(*args)
        except TrainingStopRequested:
            if self.model is not None:
                self.model.stop_training = True
            raise
        except Exception:  # noqa: BLE001 - a hook bug must not end a training run
            self._broken = True
            logger.exception("Tornasole: the Keras hook failed and stops saving; training continues")

    # -- phases and steps ---------------------------------------------------------------------
    def _phase_begin(self, mode: ModeKeys) -> None:
        self._quiet_mode = None
        self._switch_mode(mode)
        model = self.model
        if model is None or model is self._tapped_model:
            return
        self._remove_taps()
        self._tapped_model = model
        self._optimizer = getattr(model, "optimizer", None) or self._optimizer
        if self._install_taps(model):
            # the step functions are traced on their first call: make them again, now with the taps
            for kind in ("train", "test", "predict"):
                setattr(model, f"{kind}_function", None)
            if mode is ModeKeys.TRAIN:
                self._make_train_variants(model)
            else:
                getattr(model, _MAKERS[mode])(force=True)

    def set_mode(self, mode: ModeKeys) -> None:
        """Switch mode (ends a step that saved something, and turns the in-graph taps off)."""
        self._quiet_mode = None
        super().set_mode(mode)
        self._sync_taps()

    def _batch_begin(self, mode: ModeKeys) -> None:
        self._quiet_mode = None
        if mode is not self.mode:
            self._switch_mode(mode)
        self._begin_step()
        self._sync_taps()
        if not self._saving and self._open and not self._closed:
            self._quiet_until = self._next_saving_step(mode, self.mode_step + 1)
            self._quiet_mode = mode
        elif mode is _TRAIN:
            self._save_learning_rate()

    def _save_learning_rate(self) -> None:
        """Save the rate the open TRAIN step's update will use, when the step saves ``scalars``.

        Read before the update (the optimiser's counter still at this step's value); nothing is read
        when the collection is not saved at this step."""
        if self._optimizer is None or not self._saving:
            return
        plan = self._plan_for(LEARNING_RATE_NAME)
        if plan is None:
            return
        rate = current_learning_rate(self._optimizer)
        if rate is not None:
            self._write_planned(LEARNING_RATE_NAME, rate, plan)

    def _quiet_step(self) -> bool:
        """Open the next step of :attr:`_quiet_mode` when it saves nothing; False: take the full path.

        Inline, as the XGBoost hook's idle rounds: a batch callback runs after the
        framework's step has evicted the hook from the CPU caches, where the full
        path's calls cost 6-7 us a step (1-2 % of a small model's step). Quiet
        while :meth:`_still_quiet` and the mode has not been switched.
        """
        mode = self._quiet_mode
        mode_step = self.mode_steps[mode] + 1
        if (
            mode_step >= self._quiet_until
            or self.mode is not mode
            or self._saving
            or self._broken
            or not self._still_quiet()
        ):
            return False
        self.mode_steps[mode] = mode_step
        self.step = self.mode_steps[_GLOBAL] = self.step + 1  # what _begin_step does on such a step
        return True

    def _on_step_begin(self) -> None:
        self._io_values = []

    def _batch_end(self, logs: Any) -> None:
        self._save_layer_values()
        if self.mode is ModeKeys.TRAIN and self._grad_tap is not None:
            for name, grad in self._grad_tap.values():
                self._save_named(f"gradients/{name}Grad", grad)
        self._save_model_state(self.model)
        for key, value in (logs or {}).items():
            self._save_log_value(str(key), value)

    def _predict_batch_end(self, logs: Any) -> None:
        """A PREDICT step: what ``_batch_end`` saves, and the model's outputs as ``predictions``
        (``predictions_<i>`` per output of a model with several, flattened in Keras's order). Keras hands
        them to callbacks as the batch logs' ``outputs`` (every backend's ``predict``); the logs carry no
        metric there, so nothing else of them is saved."""
        self._batch_end(None)
        outputs = logs.get("outputs") if isinstance(logs, dict) else None
        if outputs is None:
            return
        flat = keras.tree.flatten(outputs)
        for name, value in zip(output_names(PREDICTIONS, len(flat)), flat, strict=True):
            self._save_named(name, value)

    def _save_model_state(self, model: Any) -> None:
        if model is not None:
            for var in model.weights:
                self._save_named("weights/" + variable_name(var), var)
        if self._optimizer is not None:
            for var in self._optimizer.variables:
                self._save_named("optimizer_variables/" + variable_name(var), var)

    def _save_log_value(self, key: str, value: Any) -> None:
        self._register_log_name(key)
        self._save_named(key, np.asarray(value, dtype=np.float32).reshape(1))

    def _register_log_name(self, key: str) -> None:
        """A log key that is no loss (``(^|_)loss$``) belongs to ``metrics``."""
        metrics = self.collection_manager.get(CollectionKeys.METRICS)
        losses = self.collection_manager.get(CollectionKeys.LOSSES)
        if not losses.matches(key) and key not in metrics.tensor_names:
            metrics.add_tensor_name(key)
            self._collections_changed()

    def _validation_begin(self) -> None:
        """fit's validation starts: the epoch's training is over, and its last TRAIN step still open."""
        if self.mode is ModeKeys.TRAIN:
            self._save_epoch_logs(self._last_train_logs, validation=False)
        self._phase_begin(ModeKeys.EVAL)

    def _validation_end(self) -> None:
        self._quiet_mode = None
        self._held_for_epoch = self._open
        self._sync_taps()

    def _epoch_end(self, logs: Any) -> None:
        held, self._held_for_epoch = self._held_for_epoch, False
        self._save_epoch_logs(logs, validation=self.mode is not ModeKeys.TRAIN)
        if held:
            self._phase_end()

    def _save_epoch_logs(self, logs: Any, validation: bool) -> None:
        """Save an epoch's logs into the open step that ends its training or validation, whatever the
        save interval.

        As smdebug's Keras hook does, ``val_loss``, ``val_accuracy`` ... are saved in the
        last validation step of each epoch (EVAL), and the epoch's training ``loss`` and
        metrics (Keras's history; in Keras 3 the last batch's running means) in a step of
        the epoch's end. One difference, to keep steps comparable within their mode: the
        training values go into the epoch's last TRAIN step (saved when validation
        begins), never into the EVAL step where smdebug writes them. A name the step
        already saved keeps the batch's own value. Written as the collections holding
        the name say (``losses`` and ``metrics``: always saved by this hook, and raw
        whatever the reduction config, as smdebug saves its scalar collections).
        """
        if not (logs and self._open and self._writes):
            return
        pending = {r[1] for r in self._pending if r[0] == "t"}  # the step's tensor and reduction tags
        for key, value in logs.items():
            key = str(key)
            if key.startswith("val_") != validation:
                continue
            self._register_log_name(key)
            plan = self._saves.plan(key, self._saves.saved_collections, self.mode)
            if plan is None:
                continue
            tags = [key] * plan.save_raw + [reduction_tag(key, r, a) for r, a in plan.reductions]
            if not pending.intersection(tags):  # else the batch saved it here: its own value stays
                self._write_planned(key, np.asarray(value, dtype=np.float32).reshape(1), plan)

    def _phase_end(self) -> None:
        self._quiet_mode = None
        if self._open:
            self._end_step()
            self._open = False
        self._sync_taps()
        self.flush()

    def close(self) -> None:
        """End the open step, write what is pending and the end marker; remove the taps.

        The collections file is written once, after the first saved step (as smdebug
        does): names first seen later (another mode's metrics) are in the index files only.
        """
        try:
            super().close()
        finally:
            self._remove_taps()

    # -- values -------------------------------------------------------------------------------
    def _write_planned(self, name: str, value: Any, plan: Any, wall_time: float | None = None) -> None:
        """Read a variable or tensor into numpy once, for the raw value and every reduction."""
        if not isinstance(value, np.ndarray):
            value = self._fresh = read_numpy(value)
        try:
            super()._write_planned(name, value, plan, wall_time)
        finally:
            self._fresh = None

    def _capture(self, value: Any) -> np.ndarray:
        if value is self._fresh:
            return value  # read by _write_planned just now: already this step's own copy
        return to_numpy(value)

    def _capture_scalar(self, value: Any) -> Any:
        return super()._capture_scalar(to_numpy(value))

    def _reduce(self, value: Any, reduction: str, abs_: bool) -> np.ndarray:
        """A 0-d reduction, as smdebug's TF hooks and the PyTorch hook write them."""
        from tornasole.format.reductions import compute

        array = value if isinstance(value, np.ndarray) else read_numpy(value)
        return np.asarray(compute(array, reduction, abs_)).reshape(())

    @staticmethod
    def _shape_of(value: Any) -> tuple[int, ...]:
        return tuple(int(d) for d in value.shape)

    @staticmethod
    def _numel(value: Any) -> int:
        if isinstance(value, np.ndarray):
            return value.size
        return math.prod(int(d) for d in getattr(value, "shape", ()))

"""``hook.wrap_tape(tf.GradientTape())``: smdebug's TF2 custom-loop API on the Keras hook.

Each ``with`` block of the wrapped tape opens one TRAIN step. ``tape.gradient``
returns TensorFlow's gradients unchanged and, on a step that saves something,
saves ``gradients/<variable>Grad`` for each source, ``weights/<variable>`` (the
variable's value when ``gradient`` is called, i.e. before the optimizer applies
the update, as smdebug does), the target as ``loss`` when it is a scalar, the
variables of an optimizer given to ``wrap_optimizer``/``register_model``, and
the inputs/outputs of a registered model's layers. Values saved with
``hook.save_tensor`` / ``save_scalar`` inside or after the block belong to the
same step. In eager mode only: inside a ``tf.function`` the values are
symbolic and the wrapped tape saves nothing (one warning).
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["WrappedTape"]

logger = logging.getLogger(__name__)


class WrappedTape:
    """A ``tf.GradientTape`` proxy that drives the hook's steps (see the module docstring)."""

    def __init__(self, hook: Any, tape: Any) -> None:
        import tensorflow as tf

        if not isinstance(tape, tf.GradientTape):
            raise TypeError(f"wrap_tape: expected a tf.GradientTape, got {type(tape).__name__}")
        self._hook = hook
        self._tape = tape
        self._warned = False

    def __enter__(self) -> WrappedTape:
        hook = self._hook
        if not hook._closed and not hook._broken:
            model = hook._registered_model
            if model is not None and model is not hook._tapped_model:
                hook._remove_taps()
                hook._tapped_model = model
                hook._install_taps(model)
            hook._begin_step()
            hook._sync_taps()
        self._tape.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._tape.__exit__(*exc)

    def gradient(self, target: Any, sources: Any, *args: Any, **kwargs: Any) -> Any:
        grads = self._tape.gradient(target, sources, *args, **kwargs)
        hook = self._hook
        if hook._saving and not hook._closed and not hook._broken:
            hook._guard(self._save, target, sources, grads)
        return grads

    def _save(self, target: Any, sources: Any, grads: Any) -> None:
        import tensorflow as tf

        from tornasole.keras.capture import variable_name

        if not tf.executing_eagerly():
            if not self._warned:
                self._warned = True
                logger.warning("Tornasole: wrap_tape saves nothing in a tf.function (values are symbolic)")
            return
        hook = self._hook
        for var, grad in zip(tf.nest.flatten(sources), tf.nest.flatten(grads)):
            name = variable_name(var)
            if grad is not None:
                if isinstance(grad, tf.IndexedSlices):
                    grad = tf.convert_to_tensor(grad)
                hook._save_named(f"gradients/{name}Grad", grad)
            hook._save_named("weights/" + name, var)
        target = tf.nest.flatten(target)
        if len(target) == 1 and int(tf.size(target[0])) == 1:
            hook._save_named("loss", tf.reshape(target[0], [1]))
        hook._save_layer_values()
        hook._save_learning_rate()
        if hook._optimizer is not None:
            for var in hook._optimizer.variables:
                hook._save_named("optimizer_variables/" + variable_name(var), var)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tape, name)

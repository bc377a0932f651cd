"""The hook's side of the in-graph taps: installing them on a model, switching them, collecting values.

See :mod:`tornasole.keras.capture` for the taps themselves. Mixed into
:class:`tornasole.keras.hook.Hook`, whose state (``_saves``, ``_flag``,
``_grad_tap``, ``_layer_taps``, ``_io_values``, ``_saving``) it uses.
"""

from __future__ import annotations

import logging
from typing import Any

import keras
import numpy as np

from tornasole.core.collection import CollectionKeys
from tornasole.keras.capture import GradientTap, LayerTap, tensorflow_backend

__all__ = ["TapsMixin"]

logger = logging.getLogger(__name__)


class TapsMixin:
    """Gradient and layer taps of one model at a time, behind one boolean ``tf.Variable``."""

    def _install_taps(self, model: Any) -> bool:
        """Gradient and layer taps for what the included collections can ever want; True if any."""
        self._saves.prepare()
        want_grads = any(
            c.name == CollectionKeys.GRADIENTS or c.matches_regex("gradients/probeGrad")
            for c in self._saves._to_save
        )
        layers = [
            layer
            for layer in model._flatten_layers(include_self=False, recursive=True)
            if not isinstance(layer, keras.layers.InputLayer)
        ]
        io = [
            (
                layer,
                bool(self._saves.collections_of(f"{layer.name}/inputs")),
                bool(self._saves.collections_of(f"{layer.name}/outputs")),
            )
            for layer in layers
        ]
        io = [t for t in io if t[1] or t[2]]
        if not (want_grads or io):
            return False
        if not tensorflow_backend():
            if not self._warned_backend:
                self._warned_backend = True
                logger.warning(
                    "Tornasole: gradients and layer inputs/outputs are saved on the TensorFlow backend only; "
                    "backend %r saves weights, biases, optimizer variables, losses and metrics",
                    keras.backend.backend(),
                )
            return False
        import tensorflow as tf

        if self._flag is None:
            self._flag = tf.Variable(False, trainable=False)
        if want_grads and self._optimizer is not None:
            self._grad_tap = GradientTap(self._optimizer, self._flag)
        for layer, want_in, want_out in io:
            self._layer_taps.append(LayerTap(layer, self._flag, self._sink, want_in, want_out))
        if io and getattr(model, "jit_compile", False):
            logger.info("Tornasole: layer input/output taps need jit_compile=False; turning XLA off")
            model.jit_compile = False
        return True

    def _remove_taps(self) -> None:
        if self._grad_tap is not None:
            self._grad_tap.remove()
            self._grad_tap = None
        for tap in self._layer_taps:
            tap.remove()
        self._layer_taps = []
        self._tapped_model = None

    def _sink(self, name: str, value: np.ndarray) -> None:
        if self._saving:  # a forward pass outside a saved step (the flag is still on) keeps nothing
            self._io_values.append((name, value))

    def _sync_taps(self) -> None:
        """Turn the in-graph taps on for a saved step, off for the others (one assign, only on change)."""
        if self._flag is not None and self._saving != self._flag_on:
            self._flag.assign(self._saving, read_value=False)
            self._flag_on = self._saving

    def _save_layer_values(self) -> None:
        values, self._io_values = self._io_values, []
        for name, value in values:
            self._save_named(name, value)

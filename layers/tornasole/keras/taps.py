"""The hook's side of the in-graph taps: installing them on a model, switching them, collecting values.

See :mod:`tornasole.keras.capture` for the taps themselves. Mixed into
:class:`tornasole.keras.hook.Hook`, whose state (``_saves``, ``_flag``,
``_switch``, ``_train_variants``, ``_grad_tap``, ``_layer_taps``,
``_loss_tap``, ``_input_tap``, ``_io_values``, ``_saving``, ``mode``) it uses.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import keras
import numpy as np

from tornasole.core.collection import CollectionKeys
from tornasole.keras.capture import GradientTap, LayerTap, TapSwitch, tensorflow_backend
from tornasole.keras.input_tap import MODEL_INPUTS, ModelInputTap
from tornasole.keras.loss_tap import LABELS, PREDICTIONS, LossTap, expected_batch_loss_names
from tornasole.keras.versions import private_tap_enabled
from tornasole.modes import ModeKeys

__all__ = ["TapsMixin"]

logger = logging.getLogger(__name__)


def _public_layers(model: Any) -> Iterator[Any]:
    """Each layer reachable through the public ``layers`` of ``model`` and of the models nested in it, once
    (a layer shared by two branches, or a walk that comes back to a layer, is not visited again)."""
    stack, seen = list(getattr(model, "layers", [])), set()
    while stack:
        layer = stack.pop()
        if id(layer) not in seen:
            seen.add(id(layer))
            yield layer
            stack.extend(getattr(layer, "layers", []))


class TapsMixin:
    """Gradient and layer taps of one model at a time: ``fit``'s two traced train steps, else a flag."""

    def _install_taps(self, model: Any) -> bool:
        """Gradient and layer taps for what the included collections can ever want; True if any."""
        self._saves.prepare()
        want_grads = any(
            c.name == CollectionKeys.GRADIENTS or c.matches_regex("gradients/probeGrad")
            for c in self._saves._to_save
        )
        layers = [
            layer for layer in self._tappable_layers(model) if not isinstance(layer, keras.layers.InputLayer)
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
        compile_loss = getattr(model, "_compile_loss", None)
        want_loss = self._wants_loss_values(model, compile_loss)
        want_input = any(self._could_save(n) for n in (MODEL_INPUTS, f"{MODEL_INPUTS}_0"))
        if not (want_grads or io or want_loss or want_input):
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
            self._switch = TapSwitch(self._flag)
        if want_grads and self._optimizer is not None:
            self._grad_tap = GradientTap(self._optimizer, self._switch)
        for layer, want_in, want_out in io:
            self._layer_taps.append(LayerTap(layer, self._switch, self._sink, want_in, want_out))
        if want_loss:
            self._loss_tap = LossTap(compile_loss, self._switch, self._sink, self._could_save)
        if want_input:
            self._input_tap = ModelInputTap(model, self._switch, self._sink, self._could_save)
        if (io or want_loss or want_input) and getattr(model, "jit_compile", False):
            logger.info("Tornasole: layer input/output and loss taps need jit_compile=False; turning XLA off")
            model.jit_compile = False
        return True

    def _tappable_layers(self, model: Any) -> list[Any]:
        """Every layer of ``model``, nested ones too (Keras's private ``_flatten_layers``): none on a Keras
        release the layer taps were not checked against (:mod:`tornasole.keras.versions`)."""
        if not self._wants_layer_values(model) or not private_tap_enabled("layers"):
            return []
        return list(model._flatten_layers(include_self=False, recursive=True))

    def _wants_layer_values(self, model: Any) -> bool:
        """Whether an included collection wants the inputs or outputs of a layer reachable through the
        public ``layers`` of the model and its nested models (asked before the private walk, so that a
        hook saving no layer values says nothing about the layer taps)."""
        return any(
            self._could_save(f"{layer.name}/{io}")
            for layer in _public_layers(model)
            for io in ("inputs", "outputs")
        )

    def _could_save(self, name: str) -> bool:
        """Whether an included collection has ``name`` or a regex matching it (records nothing)."""
        return any(name in c.tensor_names or c.matches_regex(name) for c in self._saves._to_save)

    def _wants_loss_values(self, model: Any, compile_loss: Any) -> bool:
        """Whether an included collection asks for the compiled loss's outputs, targets or batch loss
        (:mod:`tornasole.keras.loss_tap`); a model without Keras 3's compiled loss warns once."""
        names = [PREDICTIONS, f"{PREDICTIONS}_0", LABELS, f"{LABELS}_0"]  # one output, or the first of two
        if compile_loss is None or not callable(getattr(compile_loss, "call", None)):
            if getattr(model, "compiled", False) and any(self._could_save(n) for n in names):
                logger.warning(
                    "Tornasole: this Keras model has no compiled loss the hook can tap "
                    "(model._compile_loss): predictions, labels and batch_loss are not saved"
                )
            return False
        wanted = any(self._could_save(n) for n in names + expected_batch_loss_names(compile_loss))
        return wanted and private_tap_enabled("loss")

    def _make_train_variants(self, model: Any) -> None:
        """Make ``fit``'s train function twice, its taps copying and not: :meth:`_sync_taps` swaps them.

        Keras calls ``model.train_function`` afresh for every batch, so a step
        that saves nothing runs the variant without taps: no ``tf.cond``, no
        flag to assign. Each variant's step sets the switch while it is traced,
        so a retrace (a new input shape) keeps each variant what it is. The
        price: the train step is traced (and, with XLA, compiled) twice.
        """
        step = model.train_step
        own = model.__dict__.get("train_step")  # an instance attribute of the user's, kept
        variants = []
        try:
            for on in (True, False):

                def fixed_step(data: Any, _on: bool = on) -> Any:
                    with self._switch.fixing(_on):
                        return step(data)

                object.__setattr__(model, "train_step", fixed_step)
                model.make_train_function(force=True)
                variants.append(model.train_function)
        finally:
            if own is None:
                model.__dict__.pop("train_step", None)
            else:
                object.__setattr__(model, "train_step", own)
        self._train_variants = (variants[0], variants[1])
        model.train_function = variants[0] if self._saving else variants[1]

    def _remove_taps(self) -> None:
        variants, model = self._train_variants, self._tapped_model
        if variants is not None and model is not None and model.train_function is variants[0]:
            model.train_function = variants[1]  # later fits copy nothing
        self._train_variants = None
        if self._grad_tap is not None:
            self._grad_tap.remove()
            self._grad_tap = None
        if self._loss_tap is not None:
            self._loss_tap.remove()
            self._loss_tap = None
        if self._input_tap is not None:
            self._input_tap.remove()
            self._input_tap = None
        for tap in self._layer_taps:
            tap.remove()
        self._layer_taps = []
        self._tapped_model = None

    def _sink(self, name: str, value: np.ndarray) -> None:
        if self._saving:  # a forward pass outside a saved step (the flag is still on) keeps nothing
            self._io_values.append((name, value))

    def _sync_taps(self) -> None:
        """Turn the in-graph taps on for a saved step, off for the others (only on change).

        In ``fit``, by handing Keras the train-function variant the step needs;
        if Keras made a train function of its own since (a recompile), and
        elsewhere (evaluate, predict, custom loops), by assigning the flag.
        """
        variants = self._train_variants
        if variants is not None and self.mode is ModeKeys.TRAIN:
            model = self._tapped_model
            current = model.train_function
            if current is variants[0] or current is variants[1]:
                wanted = variants[0] if self._saving else variants[1]
                if current is not wanted:
                    model.train_function = wanted
                return
            self._train_variants = None
        if self._flag is not None and self._saving != self._flag_on:
            self._flag.assign(self._saving, read_value=False)
            self._flag_on = self._saving

    def _save_layer_values(self) -> None:
        values, self._io_values = self._io_values, []
        for name, value in values:
            self._save_named(name, value)

"""What the compiled loss sees in a step: ``predictions``, ``labels`` and ``batch_loss/<Kind>``.

Why: Keras reports the loss of ``fit``/``evaluate`` as a running mean over the epoch, and nothing says
which loss it is, so the rules that judge the loss's inputs (a softmax fed to a loss that expects
logits, a regression no better than the targets' mean) or the loss against its chance level (the
first loss of a classifier) have nothing to read. smdebug's TF2 Keras hook saves the model's outputs
and targets as ``predictions`` and ``labels`` in the ``outputs`` collection (``predictions_<i>``,
``labels_<i>`` for each output of a model with several, flattened); this hook saves them under the
same names and collection, and the batch's own value of the compiled loss (without the regularisation
losses Keras adds) as ``batch_loss/<Kind>``, a name that says the loss kind:

* ``<Kind>`` is the Keras loss class (``BinaryCrossentropy``, ``CategoricalCrossentropy``,
  ``SparseCategoricalCrossentropy``, ``MeanSquaredError`` ...); a loss given as a string or a function
  (``"mse"``, ``"binary_crossentropy"``, ``keras.losses.mean_squared_error``) is resolved as Keras
  resolves it and named after the function, camel-cased (``mean_squared_error`` ->
  ``MeanSquaredError``); ``"crossentropy"`` is named after the loss Keras picks from the shapes;
* ``_from_logits`` is appended when the loss takes logits (``from_logits=True``), since that is what a
  softmax-before-the-loss check must know: Keras's ``from_logits=False`` with a softmax output is the
  normal idiom, ``from_logits=True`` with one is the bug;
* no ``batch_loss`` is saved for a model compiled with several losses or a ``loss_weights`` other than 1
  (no one kind describes the sum), nor for a loss that is no ``keras.losses`` function or class and has
  no name (the outputs and targets are still saved).

How: the model's compiled loss (Keras 3's ``model._compile_loss``, what ``compute_loss`` calls in
``train_step`` and ``test_step``) has its ``call`` wrapped on the instance; its arguments are the targets
and the outputs, its result the loss. They reach the hook through :func:`tornasole.keras.capture.emit` on
the steps that save, in TRAIN (``fit``) and EVAL (``evaluate``, ``fit``'s validation) modes; ``predict``
computes no loss (its ``predictions`` come from the batch logs instead: :mod:`tornasole.keras.hook`). The
attribute is private: the tap runs only on the Keras releases it was checked against
(:mod:`tornasole.keras.versions`; on another, one warning says what is not saved), and a model without it
saves none of them, with one warning. Only the TensorFlow backend has the taps.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from tornasole.keras.capture import TapSwitch, emit
from tornasole.keras.instance_wrap import InstanceWrap

__all__ = ["PREDICTIONS", "LABELS", "BATCH_LOSS_PREFIX", "loss_kind", "output_names", "LossTap"]

logger = logging.getLogger(__name__)

#: smdebug's names for a Keras model's outputs and targets (collection ``outputs``).
PREDICTIONS = "predictions"
LABELS = "labels"
#: The batch's own compiled loss: ``batch_loss/<Kind>`` (see the module docstring).
BATCH_LOSS_PREFIX = "batch_loss/"

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def _camel(snake: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in snake.split("_") if part)


def loss_kind(loss: Any) -> str | None:
    """The ``<Kind>`` of a Keras loss (a ``keras.losses.Loss``, a loss function, or a name Keras knows),
    with ``_from_logits`` when it takes logits; None when it has none (an automatic ``"crossentropy"``
    before Keras picks one, a callable without a name).

    Examples
    --------
    >>> import keras
    >>> loss_kind("mse"), loss_kind(keras.losses.BinaryCrossentropy(from_logits=True))
    ('MeanSquaredError', 'BinaryCrossentropy_from_logits')
    >>> loss_kind("sparse_categorical_crossentropy")
    'SparseCategoricalCrossentropy'
    """
    import keras

    if isinstance(loss, str):
        if loss.lower() in ("crossentropy", "ce"):
            return None  # Keras picks binary, categorical or sparse from the shapes when it builds
        try:
            loss = keras.losses.get(loss)
        except ValueError:
            return None
    if loss is None:
        return None
    if isinstance(loss, keras.losses.Loss) and type(loss).__name__ != "LossFunctionWrapper":
        kind = type(loss).__name__
    else:
        fn = getattr(loss, "fn", loss)  # a LossFunctionWrapper built from a string or function
        name = getattr(fn, "__name__", None)
        if not name or name == "<lambda>":
            return None
        kind = _camel(name)
    kwargs = getattr(loss, "_fn_kwargs", None) or {}
    from_logits = kwargs.get("from_logits", getattr(loss, "from_logits", False))
    kind = _UNSAFE.sub("_", kind)
    return kind + "_from_logits" if from_logits is True else kind


def output_names(base: str, count: int) -> list[str]:
    """smdebug's names for ``count`` flattened outputs (or targets): ``base``, else ``base_<i>``.

    Examples
    --------
    >>> output_names("predictions", 1), output_names("labels", 2)
    (['predictions'], ['labels_0', 'labels_1'])
    """
    return [base] if count == 1 else [f"{base}_{i}" for i in range(count)]


def _single_kind(compile_loss: Any) -> str | None:
    """The kind of a built compiled loss with one loss of weight 1 (else None)."""
    flat = getattr(compile_loss, "_flat_losses", None)
    if not flat or len(flat) != 1:
        return None
    entry = flat[0]
    weight = getattr(entry, "loss_weights", None)
    if weight is not None and weight != 1:
        return None
    return loss_kind(getattr(entry, "loss", None))


def expected_batch_loss_names(compile_loss: Any) -> list[str]:
    """The ``batch_loss`` names the compiled loss may save, before it is built (to decide whether to tap).

    Examples
    --------
    >>> class Compiled:
    ...     _user_loss = "mse"
    >>> expected_batch_loss_names(Compiled())
    ['batch_loss/MeanSquaredError']
    """
    if getattr(compile_loss, "_flat_losses", None):
        kind = _single_kind(compile_loss)
        return [BATCH_LOSS_PREFIX + kind] if kind else []
    user = getattr(compile_loss, "_user_loss", None)
    if isinstance(user, (list, tuple, dict)):
        return []
    if isinstance(user, str) and user.lower() in ("crossentropy", "ce"):
        kinds = ["BinaryCrossentropy", "CategoricalCrossentropy", "SparseCategoricalCrossentropy"]
        return [BATCH_LOSS_PREFIX + k for k in kinds]
    kind = loss_kind(user) if user is not None else None
    return [BATCH_LOSS_PREFIX + kind] if kind else []


class LossTap(InstanceWrap):
    """Hands the compiled loss's targets, outputs and value to ``sink`` on the steps that save them.

    ``wanted(name)`` says whether a saved collection could want ``name``; it is asked when the loss
    call is traced, so a step function holds copies of only what is saved.
    """

    def __init__(
        self,
        compile_loss: Any,
        switch: TapSwitch,
        sink: Callable[[str, np.ndarray], None],
        wanted: Callable[[str], bool],
    ) -> None:
        self.compile_loss = compile_loss
        self.switch = switch
        self.sink = sink
        self.wanted = wanted
        self._install(compile_loss, "call")

    def _wrap(self, call: Callable[..., Any]) -> Callable[..., Any]:
        import tensorflow as tf

        def call_and_tap(y_true: Any, y_pred: Any, *args: Any, **kwargs: Any) -> Any:
            value = call(y_true, y_pred, *args, **kwargs)
            for base, values in ((PREDICTIONS, y_pred), (LABELS, y_true)):
                flat = [v for v in tf.nest.flatten(values) if v is not None]
                for name, tensor in zip(output_names(base, len(flat)), flat):
                    if self.wanted(name):
                        emit(self.switch, self.sink, name, tensor)
            kind = _single_kind(self.compile_loss)
            if kind is not None and value is not None:
                name = BATCH_LOSS_PREFIX + kind
                if self.wanted(name):
                    emit(self.switch, self.sink, name, tf.reshape(value, [1]))
            return value

        return call_and_tap

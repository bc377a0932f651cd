"""What the model is fed in a step: ``inputs`` (``inputs_<i>`` for each input of a model with several).

Why: a rule on the scale of the data (a pipeline that forgot to normalise its features) must read the
model's own input; the layer taps save ``<layer>/inputs`` of named layers, and which layer is fed the
model's input depends on how the model was built. smdebug's TF2 Keras hook saves the model's input as
``inputs`` (``inputs_<i>`` when it is a list or a dict, flattened) in the ``inputs`` collection; this
hook saves it under the same names and collection.

How: the model's ``call`` is wrapped on the instance, as the layer taps wrap a layer's, so the values are
exactly what ``train_step``, ``test_step`` and ``predict_step`` feed the model; they reach the hook through
:func:`tornasole.keras.capture.emit` on the steps that save, in every mode. Only the TensorFlow backend
has the taps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tornasole.keras.capture import TapSwitch, emit
from tornasole.keras.instance_wrap import InstanceWrap
from tornasole.keras.loss_tap import output_names

__all__ = ["MODEL_INPUTS", "ModelInputTap"]

#: smdebug's name for a Keras model's input (collection ``inputs``).
MODEL_INPUTS = "inputs"


class ModelInputTap(InstanceWrap):
    """Hands the model's input tensors to ``sink`` on the steps that save them.

    ``wanted(name)`` says whether a saved collection could want ``name``; it is asked when the call is
    traced, so a step function holds copies of only what is saved.
    """

    def __init__(
        self,
        model: Any,
        switch: TapSwitch,
        sink: Callable[[str, np.ndarray], None],
        wanted: Callable[[str], bool],
    ) -> None:
        self.model = model
        self.switch = switch
        self.sink = sink
        self.wanted = wanted
        self._install(model, "call")

    def _wrap(self, call: Callable[..., Any]) -> Callable[..., Any]:
        import tensorflow as tf

        def call_and_tap(*args: Any, **kwargs: Any) -> Any:
            if args:
                flat = [v for v in tf.nest.flatten(args[0]) if v is not None]
                for name, tensor in zip(output_names(MODEL_INPUTS, len(flat)), flat):
                    if self.wanted(name):
                        emit(self.switch, self.sink, name, tensor)
            return call(*args, **kwargs)

        return call_and_tap

"""Getting values out of a compiled Keras 3 train/test/predict step (TensorFlow backend).

Keras compiles ``train_step`` into a ``tf.function``: inside it gradients and
layer outputs are symbolic, and a callback only sees the step's logs. Two
taps run *inside* the compiled step. What they do is decided by a
:class:`TapSwitch` when the step is traced: either one boolean variable that
the hook sets only on steps that save something (the other steps run a
not-taken ``tf.cond``: evaluate, predict, custom loops), or a fixed answer. For
``fit`` the hook traces the train step twice, copying and not copying, and
hands Keras the one each step needs, so a step that saves nothing runs exactly
the user's step (a ``tf.cond`` on a variable costs 10-20 us a step, a few
percent of a small model's step):

* gradients: ``optimizer.apply`` (which ``apply_gradients`` calls with the
  tape's gradients) is wrapped on the optimizer instance; on a saved step the
  gradients are assigned to one non-trainable ``tf.Variable`` per trainable
  weight, read back after the step. No second backward pass; XLA-compatible.
* layer inputs/outputs: ``layer.call`` is wrapped on the instances whose
  ``<layer>/inputs`` or ``<layer>/outputs`` name a saved collection matches;
  on a saved step a ``tf.numpy_function`` hands a copy to the hook. A
  ``numpy_function`` cannot be XLA-compiled, so the model's ``jit_compile`` is
  turned off while such taps are installed.

Only the TensorFlow backend has these taps; on JAX and PyTorch the hook saves
what a callback can read (weights, biases, optimizer variables, losses, metrics).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from tornasole.keras.instance_wrap import InstanceWrap

__all__ = [
    "to_numpy",
    "read_numpy",
    "variable_name",
    "TapSwitch",
    "GradientTap",
    "LayerTap",
    "emit",
    "tensorflow_backend",
]

logger = logging.getLogger(__name__)


def tensorflow_backend() -> bool:
    import keras

    return keras.backend.backend() == "tensorflow"


def to_numpy(value: Any) -> np.ndarray:
    """A numpy copy of a Keras/TF variable or tensor (or anything array-like)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if hasattr(value, "numpy"):
        return np.array(value.numpy())  # TF tensors and variables, Keras variables
    try:
        import keras

        return np.array(keras.ops.convert_to_numpy(value))
    except (ImportError, ValueError, TypeError):
        return np.array(value)


def read_numpy(value: Any) -> np.ndarray:
    """:func:`to_numpy`, with TensorFlow resource variables read by one ``ReadVariableOp``.

    A saved step reads every weight and gradient slot; ``Variable.numpy()``
    goes through several Python layers (read_value, identity, Keras's autocast
    scope) and costs about four times one raw read on a small variable. The
    array TensorFlow hands back for an eager tensor owns its memory (checked:
    it is copied otherwise), so the value cannot change under the writer thread.
    """
    tf = sys.modules.get("tensorflow")
    if tf is not None and not isinstance(value, np.ndarray):
        try:
            handle = value.handle
            dtype = tf.as_dtype(value.dtype)
        except (AttributeError, TypeError, ValueError):
            pass  # not a resource variable (or a distributed one outside its replica context)
        else:
            if getattr(handle, "dtype", None) == tf.resource:
                arr = tf.raw_ops.ReadVariableOp(resource=handle, dtype=dtype).numpy()
                return arr if arr.flags.owndata else arr.copy()
    return to_numpy(value)


def variable_name(var: Any) -> str:
    """A variable's saved name: its Keras path (``sequential/dense/kernel``) or TF name without ``:0``."""
    path = getattr(var, "path", None)
    if path:
        return str(path)
    return str(var.name).split(":")[0]


class TapSwitch:
    """Whether the taps copy: the ``flag`` variable at run time, or ``fixed`` while a step is traced.

    ``fixed`` is read when a step function is traced (or, run eagerly, called):
    ``None`` puts the flag's ``tf.cond`` in the graph, ``True`` the copy alone,
    ``False`` nothing. Replica threads of a distribution strategy trace inside
    one :meth:`fixing` block, so it is a plain attribute, not a thread-local.
    """

    def __init__(self, flag: Any) -> None:
        self.flag = flag
        self.fixed: bool | None = None

    @contextmanager
    def fixing(self, on: bool) -> Iterator[None]:
        previous, self.fixed = self.fixed, on
        try:
            yield
        finally:
            self.fixed = previous


class GradientTap(InstanceWrap):
    """Copies the gradients given to ``optimizer.apply`` into variables on the steps that save them."""

    def __init__(self, optimizer: Any, switch: TapSwitch) -> None:
        self.optimizer = optimizer
        self.switch = switch
        # one slot per trainable variable, made on the first apply (subclassed models build late)
        self.slots: dict[str, Any] = {}
        self.order: list[str] = []
        self._install(optimizer, "apply")

    def _slot(self, var: Any) -> Any:
        import tensorflow as tf

        name = variable_name(var)
        slot = self.slots.get(name)
        if slot is None:
            with tf.init_scope():  # created eagerly, outside the step function being traced
                slot = tf.Variable(tf.zeros(tuple(var.shape), dtype=var.dtype), trainable=False)
            self.slots[name] = slot
            self.order.append(name)
        return slot

    def _wrap(self, apply: Callable[..., Any]) -> Callable[..., Any]:
        import tensorflow as tf

        def apply_and_tap(grads: Any, trainable_variables: Any = None) -> Any:
            variables = (
                self.optimizer._trainable_variables if trainable_variables is None else trainable_variables
            )
            pairs = [(self._slot(v), g) for g, v in zip(list(grads), list(variables)) if g is not None]

            def copy() -> Any:
                for slot, g in pairs:
                    slot.assign(tf.convert_to_tensor(g))
                return tf.constant(True)

            fixed = self.switch.fixed
            if pairs and fixed is None:
                tf.cond(self.switch.flag, copy, lambda: tf.constant(False))
            elif pairs and fixed:
                copy()
            return apply(grads, trainable_variables)

        return apply_and_tap

    def values(self) -> list[tuple[str, np.ndarray]]:
        """``(variable name, gradient)`` of the last flagged step, in trainable-weight order."""
        return [(name, read_numpy(self.slots[name])) for name in self.order]


def emit(switch: TapSwitch, sink: Callable[[str, np.ndarray], None], name: str, value: Any) -> None:
    """Hand ``value`` to ``sink`` as ``name`` on the steps ``switch`` copies (see the module docstring).

    Inside a traced step a ``tf.numpy_function`` does the copy (behind a ``tf.cond`` on the flag when the
    switch is not fixed); run eagerly, the tensor is copied at once. Symbolic Keras tensors (shape
    inference) are ignored.
    """
    import tensorflow as tf

    if not isinstance(value, tf.Tensor):
        return  # symbolic KerasTensors while Keras builds or infers shapes
    fixed = switch.fixed
    if tf.executing_eagerly():
        if fixed if fixed is not None else bool(switch.flag.numpy()):
            sink(name, np.array(value.numpy()))
        return

    def push(arr: np.ndarray) -> np.bool_:
        sink(name, np.array(arr))
        return np.bool_(True)

    if fixed is None:
        tf.cond(
            switch.flag,
            lambda: tf.numpy_function(push, [value], tf.bool, stateful=True),
            lambda: tf.constant(False),
        )
    elif fixed:
        tf.numpy_function(push, [value], tf.bool, stateful=True)


class LayerTap(InstanceWrap):
    """Hands a layer's first input and first output tensor to ``sink`` on the steps that save them."""

    def __init__(
        self,
        layer: Any,
        switch: TapSwitch,
        sink: Callable[[str, np.ndarray], None],
        want_input: bool,
        want_output: bool,
    ) -> None:
        self.layer = layer
        self.switch = switch
        self.sink = sink
        self.names = (
            f"{layer.name}/inputs" if want_input else None,
            f"{layer.name}/outputs" if want_output else None,
        )
        self._install(layer, "call")

    def _emit(self, name: str, value: Any) -> None:
        emit(self.switch, self.sink, name, value)

    def _wrap(self, call: Callable[..., Any]) -> Callable[..., Any]:
        import tensorflow as tf

        def call_and_tap(*args: Any, **kwargs: Any) -> Any:
            out = call(*args, **kwargs)
            name_in, name_out = self.names
            if name_in and args:
                first = tf.nest.flatten(args[0])
                if first:
                    self._emit(name_in, first[0])
            if name_out:
                first = tf.nest.flatten(out)
                if first:
                    self._emit(name_out, first[0])
            return out

        return call_and_tap

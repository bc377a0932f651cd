"""Each in-graph tap wraps one method of one instance and hands it back on ``remove``: the class and the
other instances keep theirs while it is on, a method the instance had of its own comes back as it was,
and one it did not have leaves no attribute behind (Keras's own method shows through again)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.frameworks.conftest import regression_data, tiny_model
from tornasole.keras.capture import GradientTap, LayerTap, TapSwitch
from tornasole.keras.input_tap import ModelInputTap
from tornasole.keras.loss_tap import LossTap


def _everything(name: str) -> bool:
    return True


def _targets(keras, tf):
    """(tap name, the instance, a second instance of its class, its method, install(instance, sink))."""
    model, other = tiny_model(keras, seed=0), tiny_model(keras, seed=1)
    switch = TapSwitch(tf.Variable(False, trainable=False))
    return {
        "layer": (
            model.get_layer("d1"),
            other.get_layer("d1"),
            "call",
            lambda target, sink: LayerTap(target, switch, sink, True, True),
        ),
        "model input": (
            model,
            other,
            "call",
            lambda target, sink: ModelInputTap(target, switch, sink, _everything),
        ),
        "loss": (
            model._compile_loss,
            other._compile_loss,
            "call",
            lambda target, sink: LossTap(target, switch, sink, _everything),
        ),
        "gradients": (
            model.optimizer,
            other.optimizer,
            "apply",
            lambda target, sink: GradientTap(target, switch),
        ),
    }, switch


TAPS = ["layer", "model input", "loss", "gradients"]


@pytest.mark.parametrize("tap", TAPS)
def test_a_tap_wraps_one_instance_and_leaves_nothing_behind(keras_tf, tap):
    keras, tf = keras_tf
    targets, _ = _targets(keras, tf)
    target, other, method, install = targets[tap]
    assert method not in target.__dict__
    installed = install(target, lambda name, value: None)
    assert method in target.__dict__  # on the instance ...
    assert method not in other.__dict__  # ... not on its class or a sibling
    assert getattr(type(target), method) is getattr(type(other), method)
    installed.remove()
    assert method not in target.__dict__
    assert getattr(target, method).__func__ is getattr(type(target), method)


@pytest.mark.parametrize("tap", TAPS)
def test_a_method_the_instance_had_of_its_own_comes_back(keras_tf, tap):
    keras, tf = keras_tf
    targets, _ = _targets(keras, tf)
    target, _, method, install = targets[tap]
    own = getattr(target, method)  # bound: an instance attribute of the user's, wrapping nothing
    object.__setattr__(target, method, own)
    installed = install(target, lambda name, value: None)
    assert target.__dict__[method] is not own
    installed.remove()
    assert target.__dict__[method] is own


def test_a_wrapped_layer_call_hands_its_values_over_when_switched_on(keras_tf):
    keras, tf = keras_tf
    targets, switch = _targets(keras, tf)
    layer, _, _, install = targets["layer"]
    got = []
    tap = install(layer, lambda name, value: got.append((name, value.shape)))
    x, _ = regression_data(n=2)
    with switch.fixing(False):
        layer(tf.constant(x))
    assert got == []
    with switch.fixing(True):
        out = layer(tf.constant(x))
    tap.remove()
    assert got == [("d1/inputs", (2, 4)), ("d1/outputs", (2, 3))]
    assert np.asarray(out).shape == (2, 3)

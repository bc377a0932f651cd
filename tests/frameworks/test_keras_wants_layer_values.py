"""The hook asks whether any included collection wants a layer's ``inputs`` or ``outputs`` before it walks a
model's layers with Keras's private ``_flatten_layers`` (so a hook that saves no layer values says nothing
about the layer taps' version gate). The truth table of that question (``TapsMixin._wants_layer_values``):
every layer reachable through the public ``layers`` of the model and of the models nested in it counts, the
model itself does not, a layer reached twice is asked once, and a walk that comes back to a layer ends."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tornasole.keras.taps import TapsMixin


class _Asker(TapsMixin):
    """The mixin alone, over a fixed set of wanted tensor names (what ``_could_save`` reads from the
    hook's collections); records every name it is asked about."""

    def __init__(self, wanted: set[str]) -> None:
        self.wanted = wanted
        self.asked: list[str] = []

    def _could_save(self, name: str) -> bool:
        self.asked.append(name)
        return name in self.wanted


def _layer(name: str, *layers):
    return SimpleNamespace(name=name, layers=list(layers))


def _flat():
    return _layer("net", _layer("d1"), _layer("d2"), _layer("out"))


def _nested():
    inner = _layer("inner", _layer("i1"), _layer("deep", _layer("deepest")))
    return _layer("outer", _layer("d1"), inner, _layer("out"))


def _shared():
    shared = _layer("shared")
    return _layer("net", shared, _layer("branch", shared), shared)


def _cycle():
    a, b = _layer("a"), _layer("b")
    a.layers.append(b)
    b.layers.append(a)
    return _layer("net", a)


CASES = [
    # (model, wanted names, answer)
    (SimpleNamespace(name="no_layers"), {"no_layers/outputs"}, False),
    (_layer("empty"), {"empty/inputs", "empty/outputs"}, False),
    (_flat(), set(), False),
    (_flat(), {"d2/inputs"}, True),
    (_flat(), {"out/outputs"}, True),
    (_flat(), {"net/inputs", "net/outputs"}, False),  # the model itself is not one of its layers
    (_flat(), {"d1/weights", "d1", "inputs", "d1/inputs/extra"}, False),  # only <layer>/inputs|outputs
    (_flat(), {"D1/inputs"}, False),  # names as Keras spells them
    (_nested(), {"i1/outputs"}, True),
    (_nested(), {"deepest/inputs"}, True),  # two models down
    (_nested(), {"inner/outputs"}, True),  # a nested model is a layer of its parent
    (_nested(), {"outer/outputs"}, False),
    (_shared(), {"shared/outputs"}, True),
    (_shared(), {"other/outputs"}, False),
    (_cycle(), {"b/inputs"}, True),
    (_cycle(), set(), False),  # the walk ends
]


@pytest.mark.parametrize(("model", "wanted", "answer"), CASES)
def test_the_truth_table(model, wanted, answer):
    assert _Asker(wanted)._wants_layer_values(model) is answer


@pytest.mark.parametrize(("model", "layers"), [(_shared(), {"shared", "branch"}), (_cycle(), {"a", "b"})])
def test_a_layer_reached_twice_is_asked_about_once(model, layers):
    asker = _Asker(set())
    assert asker._wants_layer_values(model) is False
    assert sorted(asker.asked) == sorted(f"{name}/{io}" for name in layers for io in ("inputs", "outputs"))


def test_real_keras_models(keras_tf):
    keras, _ = keras_tf
    inner = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="inner_dense")], name="inner")
    outer = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="first"), inner], name="outer")
    assert _Asker({"inner_dense/outputs"})._wants_layer_values(outer) is True
    assert _Asker({"first/inputs"})._wants_layer_values(outer) is True
    assert _Asker({"inner/outputs"})._wants_layer_values(outer) is True
    assert _Asker({"outer/outputs"})._wants_layer_values(outer) is False
    assert _Asker(set())._wants_layer_values(outer) is False

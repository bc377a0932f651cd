"""Broken Keras runs make the built-in rules fire; their healthy twins do not."""

from __future__ import annotations

import numpy as np

from tests.frameworks.conftest import regression_data, tiny_model
from tornasole.core.reduction_config import ReductionConfig
from tornasole.core.save_config import SaveConfig
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.exploding_tensor import ExplodingTensor
from tornasole.rules.builtin.vanishing_gradient import VanishingGradient
from tornasole.trials import create_trial


def _fit(keras, out, *, steps=6, **model_kwargs):
    from tornasole.keras import Hook

    model = tiny_model(keras, **model_kwargs)
    x, y = regression_data(4 * steps)
    hook = Hook(
        str(out),
        save_config=SaveConfig(save_interval=1),
        include_collections=["weights", "gradients"],
        # full tensors, plus the abs_mean VanishingGradient reads
        reduction_config=ReductionConfig(abs_reductions=["mean"], save_raw_tensor=True),
    )
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[hook])
    hook.close()
    return create_trial(str(out))


def test_learning_rate_far_too_high_explodes(keras_tf, tmp_path):
    keras, _ = keras_tf
    broken = _fit(keras, tmp_path / "broken", lr=1e9, hidden=(8, 8))
    assert not np.isfinite(broken.tensor("weights/net/out/kernel").value(5)).all()
    fired = invoke_rule(ExplodingTensor(broken, collection_names="gradients,weights")).fired
    assert fired
    assert fired[0].step <= 3

    healthy = _fit(keras, tmp_path / "healthy", lr=0.01, hidden=(8, 8))
    summary = invoke_rule(ExplodingTensor(healthy, collection_names="gradients,weights"))
    assert summary.fired == []
    assert summary.steps_evaluated == 6


def test_sigmoid_stack_vanishes(keras_tf, tmp_path):
    keras, _ = keras_tf
    broken = _fit(keras, tmp_path / "sigmoid", activation="sigmoid", hidden=(4,) * 12, lr=0.01)
    first = broken.tensor("gradients/net/d1/kernelGrad").reduction_value(0, "mean", abs=True)
    assert first < 1e-7
    fired = invoke_rule(VanishingGradient(broken)).fired
    assert [o.step for o in fired] == list(range(6))

    healthy = _fit(keras, tmp_path / "relu", activation="relu", hidden=(8, 8), lr=0.01)
    summary = invoke_rule(VanishingGradient(healthy))
    assert summary.fired == []
    assert summary.steps_evaluated == 6

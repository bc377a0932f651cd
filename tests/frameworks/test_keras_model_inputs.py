"""The Keras hook saves what the model is fed as ``inputs`` (smdebug's name; ``inputs_<i>`` per input of a
model with several) when a collection asks, and InputsNotNormalized judges Keras runs with it: a tiny
``fit`` on standardised features stays quiet, the same features x100 fire."""

from __future__ import annotations

import numpy as np

from tests.frameworks.conftest import regression_data, tiny_model
from tornasole.core.save_config import SaveConfig
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.inputs_not_normalized import InputsNotNormalized
from tornasole.trials import create_trial


def _hook(out, collections=("model_input",)):
    from tornasole.keras import Hook

    hook = Hook(str(out), save_config=SaveConfig(save_interval=2), include_collections=list(collections))
    ((coll, params),) = InputsNotNormalized.COLLECTIONS
    hook.get_collection(coll).include(params["include_regex"])
    return hook


def test_the_models_input_is_saved_in_train_and_eval_steps(keras_tf, tmp_path):
    keras, _ = keras_tf
    model = tiny_model(keras)
    x, y = regression_data(n=16)
    hook = _hook(tmp_path / "run")
    model.fit(
        x, y, batch_size=4, epochs=1, shuffle=False, verbose=0, callbacks=[hook], validation_data=(x, y)
    )
    hook.close()
    trial = create_trial(str(tmp_path / "run"))
    assert "inputs" in trial.tensor_names()
    assert not any(n.endswith("/inputs") for n in trial.tensor_names()), "no layer's input is asked for"
    tensor = trial.tensor("inputs")
    np.testing.assert_array_equal(tensor.value(0), x[:4])  # TRAIN step 0: the first batch
    assert {trial.mode(s).name for s in tensor.steps()} == {"TRAIN", "EVAL"}
    assert "inputs" in trial.tensor_names(collection="model_input")


def test_a_model_with_two_inputs_saves_each(keras_tf, tmp_path):
    keras, _ = keras_tf
    a, b = keras.Input((2,), name="a"), keras.Input((3,), name="b")
    out = keras.layers.Dense(1, name="out")(keras.layers.Concatenate()([a, b]))
    model = keras.Model([a, b], out)
    model.compile("sgd", "mse")
    xa, xb = np.ones((8, 2), np.float32), np.full((8, 3), 2.0, np.float32)
    hook = _hook(tmp_path / "two")
    model.fit([xa, xb], np.ones((8, 1)), batch_size=4, epochs=1, verbose=0, callbacks=[hook])
    hook.close()
    trial = create_trial(str(tmp_path / "two"))
    assert {n for n in trial.tensor_names() if n.startswith("inputs")} == {"inputs_0", "inputs_1"}
    assert trial.tensor("inputs_1").value(0).shape == (4, 3)


def test_nothing_is_tapped_when_no_collection_asks(keras_tf, tmp_path):
    keras, _ = keras_tf
    model = tiny_model(keras)
    x, y = regression_data(n=8)
    hook = _hook(tmp_path / "none", collections=("losses",))
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[hook])
    assert hook._input_tap is None
    assert "call" not in model.__dict__
    hook.close()
    assert "inputs" not in create_trial(str(tmp_path / "none")).tensor_names()


def test_inputs_not_normalized_judges_a_keras_run(keras_tf, tmp_path):
    keras, _ = keras_tf
    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 4)).astype(np.float32)
    y = x @ np.array([[1.0], [-2.0], [0.5], [3.0]], dtype=np.float32)
    verdicts = {}
    for scale in (1.0, 100.0):
        model = tiny_model(keras, lr=1e-5)
        out = tmp_path / f"scale{scale}"
        hook = _hook(out)
        model.fit(x * scale, y, batch_size=16, epochs=2, verbose=0, callbacks=[hook])
        hook.close()
        verdicts[scale] = invoke_rule(InputsNotNormalized(create_trial(str(out))))
    assert verdicts[1.0].status == "NoIssuesFound"
    assert verdicts[100.0].fired
    assert verdicts[100.0].fired[0].values["tensor"] == "inputs"

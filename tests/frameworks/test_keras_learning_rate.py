"""The Keras hook saves the learning rate each saved TRAIN step's update uses, as ``scalar/lr/0`` in the
``scalars`` collection: the PyTorch hook's name and collection, so the rules that read a rate read both.

Each test reads the trace back through the Trial API. The rate must be the one the update used: a
``CosineDecay`` with a warmup saves the schedule's value at the optimiser's counter of that step; under mixed
precision the ``LossScaleOptimizer``'s inner optimiser owns the rate.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import tornasole.pytorch as ts
from tests.frameworks.conftest import regression_data, tiny_model
from tornasole.core.save_config import SaveConfig
from tornasole.keras.learning_rate import LEARNING_RATE_NAME, current_learning_rate
from tornasole.trials import create_trial


def _fit(keras, model, out, *, interval=1, collections=("losses", "scalars"), epochs=2, n=32, batch=4):
    from tornasole.keras import Hook

    hook = Hook(
        str(out), save_config=SaveConfig(save_interval=interval), include_collections=list(collections)
    )
    x, y = regression_data(n=n)
    model.fit(x, y, batch_size=batch, epochs=epochs, shuffle=False, verbose=0, callbacks=[hook])
    hook.close()
    return create_trial(str(out))


def _train_rates(trial):
    from tornasole.modes import ModeKeys

    tensor = trial.tensor(LEARNING_RATE_NAME)
    return {
        trial.mode_step(s): float(tensor.value(s)) for s in tensor.steps() if trial.mode(s) is ModeKeys.TRAIN
    }


def test_a_constant_rate_is_saved_at_every_saved_train_step(keras_tf, tmp_path):
    keras, _ = keras_tf
    trial = _fit(keras, tiny_model(keras, lr=0.05), tmp_path / "const", interval=3)
    rates = _train_rates(trial)
    assert sorted(rates) == list(range(0, 16, 3))  # 2 epochs x 8 batches, every third TRAIN step
    assert all(r == pytest.approx(0.05) for r in rates.values())
    assert LEARNING_RATE_NAME in trial.tensor_names(collection="scalars")
    assert trial.tensor(LEARNING_RATE_NAME).value(0).shape in ((), (1,))


def test_a_cosine_decay_with_warmup_saves_the_schedules_rate_of_each_step(keras_tf, tmp_path):
    keras, _ = keras_tf
    schedule = keras.optimizers.schedules.CosineDecay(0.0, decay_steps=10, warmup_target=0.1, warmup_steps=6)
    model = tiny_model(keras)
    model.compile(optimizer=keras.optimizers.Adam(schedule), loss="mse")
    trial = _fit(keras, model, tmp_path / "cosine")
    rates = _train_rates(trial)
    assert sorted(rates) == list(range(16))
    expected = {k: float(schedule(k)) for k in range(16)}
    assert rates == pytest.approx(expected, rel=1e-6, abs=1e-9)
    assert rates[0] == 0.0  # the warmup from 0 ...
    assert rates[6] == pytest.approx(0.1)  # ... to the peak
    assert rates[3] < rates[5]


def test_the_inner_rate_of_a_loss_scale_optimizer_is_saved(keras_tf, tmp_path):
    keras, _ = keras_tf
    schedule = keras.optimizers.schedules.PolynomialDecay(0.2, decay_steps=8, end_learning_rate=0.01)
    model = tiny_model(keras)
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(schedule))
    model.compile(optimizer=opt, loss="mse")
    trial = _fit(keras, model, tmp_path / "mixed", epochs=1)
    rates = _train_rates(trial)
    assert rates == pytest.approx({k: float(schedule(k)) for k in range(8)}, rel=1e-6)


def test_mixed_precision_policy_saves_the_rate(keras_tf, tmp_path):
    keras, _ = keras_tf
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = tiny_model(keras, lr=0.03)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    assert type(model.optimizer).__name__ == "LossScaleOptimizer"  # compile wraps it under the policy
    rates = _train_rates(_fit(keras, model, tmp_path / "policy", epochs=1))
    assert len(rates) == 8
    assert all(r == pytest.approx(0.03) for r in rates.values())


def test_nothing_is_read_when_the_scalars_collection_is_not_saved(keras_tf, tmp_path, monkeypatch):
    keras, _ = keras_tf
    import tornasole.keras.hook as keras_hook

    calls = []
    monkeypatch.setattr(keras_hook, "current_learning_rate", lambda opt: calls.append(opt))
    trial = _fit(keras, tiny_model(keras), tmp_path / "none", collections=("losses",), epochs=1)
    assert calls == []
    assert LEARNING_RATE_NAME not in trial.tensor_names()


def test_a_custom_loop_saves_the_rate_its_apply_uses(keras_tf, tmp_path):
    keras, tf = keras_tf
    from tornasole.keras import Hook

    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5)
    model = tiny_model(keras)
    opt = keras.optimizers.SGD(schedule)
    hook = Hook(
        str(tmp_path / "loop"), save_config=SaveConfig(save_interval=1), include_collections=["scalars"]
    )
    hook.register_model(model)
    hook.wrap_optimizer(opt)
    x, y = regression_data(n=12)
    for k in range(3):
        with hook.wrap_tape(tf.GradientTape()) as tape:
            loss = tf.reduce_mean((model(x[k * 4 : k * 4 + 4]) - y[k * 4 : k * 4 + 4]) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply(grads, model.trainable_variables)
    hook.close()
    rates = _train_rates(create_trial(str(tmp_path / "loop")))
    assert rates == pytest.approx({0: 0.1, 1: 0.05, 2: 0.025})


def test_current_learning_rate_reads_every_kind_of_rate(keras_tf):
    keras, _ = keras_tf
    assert current_learning_rate(None) is None
    assert float(current_learning_rate(keras.optimizers.SGD(0.25))) == pytest.approx(0.25)
    fn = keras.optimizers.Adam(learning_rate=lambda: 0.125)
    assert float(current_learning_rate(fn)) == pytest.approx(0.125)
    assert current_learning_rate(object()) is None


def test_the_pytorch_and_keras_hooks_save_the_rate_under_one_name_and_collection(keras_tf, tmp_path):
    keras, _ = keras_tf
    keras_trial = _fit(keras, tiny_model(keras, lr=0.05), tmp_path / "keras", epochs=1)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    hook = ts.Hook(str(tmp_path / "torch"), statistics=True)
    hook.register_module(model)
    hook.register_optimizer(opt)
    x, y = (torch.from_numpy(a) for a in regression_data(n=8))
    for k in range(2):
        loss = ((model(x[k * 4 : k * 4 + 4]) - y[k * 4 : k * 4 + 4]) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    hook.close()
    torch_trial = create_trial(str(tmp_path / "torch"))

    def rate_names(trial):
        return {n for n in trial.tensor_names(collection="scalars") if n.startswith("scalar/lr")}

    assert rate_names(keras_trial) == rate_names(torch_trial) == {LEARNING_RATE_NAME}
    assert float(np.asarray(torch_trial.tensor(LEARNING_RATE_NAME).value(0))) == pytest.approx(
        float(np.asarray(keras_trial.tensor(LEARNING_RATE_NAME).value(0)))
    )

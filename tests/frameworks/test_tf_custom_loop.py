"""TF2 custom training loops: hook.wrap_tape(tf.GradientTape()), save_tensor, set_mode."""

from __future__ import annotations

import numpy as np
import pytest

from tests.frameworks.conftest import regression_data, tiny_model
from tornasole.core.save_config import SaveConfig
from tornasole.modes import ModeKeys
from tornasole.trials import create_trial


def test_wrapped_tape_saves_the_tape_gradients_weights_and_loss(keras_tf, tmp_path):
    keras, tf = keras_tf
    import tornasole.tensorflow as ts

    model = tiny_model(keras)
    opt = keras.optimizers.SGD(0.05)
    hook = ts.KerasHook(
        str(tmp_path),
        save_config=SaveConfig(save_interval=1),
        include_collections=["weights", "biases", "gradients", "losses", "optimizer_variables"],
        include_regex="^d1/outputs$",
    )
    hook.register_model(model)
    hook.wrap_optimizer(opt)
    x, y = regression_data(8)
    seen = []
    for step in range(3):
        with hook.wrap_tape(tf.GradientTape()) as tape:
            pred = model(x, training=True)
            loss = tf.reduce_mean(tf.square(pred - y))
        weights = {v.path: v.numpy().copy() for v in model.trainable_weights}
        grads = tape.gradient(loss, model.trainable_weights)
        seen.append((weights, [g.numpy() for g in grads], float(loss)))
        opt.apply_gradients(zip(grads, model.trainable_weights))
        hook.save_tensor("batch_mean", tf.reduce_mean(x) + step, "custom")
    hook.set_mode(ModeKeys.EVAL)
    hook.save_scalar("val_loss", 0.5)
    hook.next_step()
    hook.close()

    trial = create_trial(str(tmp_path))
    assert trial.steps(mode=ModeKeys.TRAIN) == [0, 1, 2]
    for step, (weights, grads, loss) in enumerate(seen):
        for var, grad in zip(model.trainable_weights, grads):
            np.testing.assert_array_equal(trial.tensor(f"gradients/{var.path}Grad").value(step), grad)
            np.testing.assert_array_equal(trial.tensor(f"weights/{var.path}").value(step), weights[var.path])
        assert trial.tensor("loss").value(step).item() == pytest.approx(loss, rel=1e-6)
        assert trial.tensor("batch_mean").value(step).item() == pytest.approx(
            float(x.mean()) + step, rel=1e-6
        )
        assert trial.tensor("d1/outputs").value(step).shape == (8, 3)
    assert trial.tensor(f"optimizer_variables/{opt.iterations.path}").value(2).item() == 2
    assert trial.tensor("scalar/val_loss").value(0, mode=ModeKeys.EVAL).item() == 0.5
    assert trial.tensor_names(collection="custom") == ["batch_mean"]


def test_wrap_tape_rejects_what_is_not_a_tape(keras_tf, tmp_path):
    from tornasole.keras import Hook

    hook = Hook(str(tmp_path))
    with pytest.raises(TypeError, match="tf.GradientTape"):
        hook.wrap_tape(object())
    hook.close()

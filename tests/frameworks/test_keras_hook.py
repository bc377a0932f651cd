"""Keras 3 hook on the TensorFlow backend: what fit/evaluate/predict save, read back with create_trial."""

from __future__ import annotations

import numpy as np
import pytest

from tests.frameworks.conftest import regression_data, tiny_model
from tornasole.core.reduction_config import ReductionConfig
from tornasole.core.save_config import SaveConfig
from tornasole.modes import ModeKeys
from tornasole.trials import create_trial

W1, B1 = "weights/net/d1/kernel", "weights/net/d1/bias"
G1 = "gradients/net/d1/kernelGrad"


class _Recorder:
    """A test callback keeping each TRAIN batch's weights before and after the optimizer step."""

    def __init__(self, keras, model):
        self.model = model
        self.before, self.after = [], []
        recorder = self

        class _CB(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                recorder.before.append({v.path: v.numpy().copy() for v in recorder.model.weights})

            def on_train_batch_end(self, batch, logs=None):
                recorder.after.append({v.path: v.numpy().copy() for v in recorder.model.weights})

        self.callback = _CB()


def test_fit_weights_after_step_and_tape_gradients_read_back(keras_tf, tmp_path):
    keras, _ = keras_tf
    from tornasole.keras import Hook

    lr = 0.1
    model = tiny_model(keras, lr=lr)
    x, y = regression_data()
    rec = _Recorder(keras, model)
    hook = Hook(
        str(tmp_path),
        save_config=SaveConfig(save_interval=1),
        include_collections=["weights", "biases", "gradients", "optimizer_variables"],
    )
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[rec.callback, hook])
    hook.close()

    trial = create_trial(str(tmp_path))
    assert trial.steps(mode=ModeKeys.TRAIN) == [0, 1, 2, 3]
    assert set(trial.tensor_names(collection="weights")) == {W1, "weights/net/out/kernel"}
    assert set(trial.tensor_names(collection="biases")) == {B1, "weights/net/out/bias"}
    for step in range(4):
        # weights: exactly the model's values after the optimizer step of this batch
        np.testing.assert_array_equal(trial.tensor(W1).value(step), rec.after[step]["net/d1/kernel"])
        np.testing.assert_array_equal(trial.tensor(B1).value(step), rec.after[step]["net/d1/bias"])
        # gradients: the ones SGD applied (w_after = w_before - lr * g), from the step's own tape
        applied = (rec.before[step]["net/d1/kernel"] - rec.after[step]["net/d1/kernel"]) / lr
        np.testing.assert_allclose(trial.tensor(G1).value(step), applied, rtol=1e-4, atol=1e-6)
    iterations = f"optimizer_variables/{model.optimizer.iterations.path}"  # sgd, sgd_1... per process
    assert trial.tensor(iterations).value(3).item() == 4
    losses = trial.tensor("loss").values()
    assert sorted(losses) == [0, 1, 2, 3]
    assert all(np.isfinite(v).all() for v in losses.values())
    assert trial.tensor_names(collection="metrics") == ["mae"]


def test_modes_steps_layer_outputs_and_scalars(keras_tf, tmp_path):
    keras, _ = keras_tf
    from tornasole.keras import Hook

    model = tiny_model(keras)
    x, y = regression_data()
    hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=2), include_regex="^out/")
    model.fit(
        x,
        y,
        batch_size=4,
        epochs=1,
        verbose=0,
        shuffle=False,
        validation_data=(x[:8], y[:8]),
        callbacks=[hook],
    )
    model.evaluate(x, y, batch_size=8, verbose=0, callbacks=[hook])
    preds = model.predict(x, batch_size=8, verbose=0, callbacks=[hook])
    hook.save_scalar("lr", 0.1)
    hook.close()

    trial = create_trial(str(tmp_path))
    # 4 train batches, 2 validation, 2 evaluate (EVAL 0..3), 2 predict: global steps 0..9; whatever the
    # interval, the epoch's end saves its training logs in its last TRAIN step (3) and its val_ logs in
    # its last validation step (EVAL 1, global 5)
    assert trial.steps(mode=ModeKeys.TRAIN) == [0, 2, 3]
    assert trial.steps(mode=ModeKeys.EVAL) == [0, 1, 2]
    # save_scalar after predict ended: no step is open, so "lr" joins the step that would come next
    # (PREDICT 2, global 10), written at close although the save config skips it (it used to be dropped)
    assert trial.steps(mode=ModeKeys.PREDICT) == [0, 2]
    assert trial.steps() == [0, 2, 3, 4, 5, 6, 8, 10]
    assert trial.tensor_names(step=10) == ["scalar/lr"]
    assert trial.tensor("scalar/lr").value(2, mode=ModeKeys.PREDICT).item() == 0.1
    assert trial.tensor_names(step=3) == ["loss", "mae"]
    assert trial.tensor_names(step=5) == ["val_loss", "val_mae"]
    assert set(trial.tensor_names()) >= {"out/inputs", "out/outputs", "loss", "mae"}
    # the output layer's output on the first predict batch is the model's prediction
    out = trial.tensor("out/outputs").value(0, mode=ModeKeys.PREDICT)
    np.testing.assert_allclose(out, preds[:8], rtol=1e-6)
    assert trial.tensor("out/inputs").value(0, mode=ModeKeys.PREDICT).shape == (8, 3)
    assert "gradients/net/out/kernelGrad" not in trial.tensor_names()


def test_reductions_instead_of_full_tensors(keras_tf, tmp_path):
    keras, _ = keras_tf
    from tornasole.keras import Hook

    model = tiny_model(keras)
    x, y = regression_data()
    rec = _Recorder(keras, model)
    hook = Hook(
        str(tmp_path),
        save_config=SaveConfig(save_interval=1),
        reduction_config=ReductionConfig(reductions=["mean"], abs_reductions=["max"], norms=["l2"]),
        include_collections=["weights"],
    )
    model.fit(x[:8], y[:8], batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[rec.callback, hook])
    hook.close()
    w = rec.after[1]["net/d1/kernel"]
    t = create_trial(str(tmp_path)).tensor(W1)
    assert t.reduction_value(1, "mean") == pytest.approx(float(w.mean()), rel=1e-6)
    assert t.reduction_value(1, "max", abs=True) == pytest.approx(float(np.abs(w).max()), rel=1e-6)
    assert t.reduction_value(1, "l2") == pytest.approx(float(np.linalg.norm(w)), rel=1e-6)


def test_unsaved_steps_run_no_tap(keras_tf, tmp_path):
    keras, _ = keras_tf
    from tornasole.keras import Hook

    model = tiny_model(keras, lr=0.1)
    x, y = regression_data()
    hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=3), include_collections=["gradients"])
    ran, slots = [], []

    class _Watch(keras.callbacks.Callback):  # after the hook: sees the train function the batch runs
        def on_train_batch_begin(self, batch, logs=None):
            on, off = hook._train_variants
            fn = model.train_function
            ran.append("taps" if fn is on else "plain" if fn is off else "?")

        def on_train_batch_end(self, batch, logs=None):
            slots.append(hook._grad_tap.values()[0][1].copy())

    rec = _Recorder(keras, model)
    callbacks = [rec.callback, hook, _Watch()]
    model.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False, callbacks=callbacks)
    # fit calls the variant with the taps on the saved steps only; the others run the user's step alone
    assert ran == ["taps", "plain", "plain", "taps", "plain", "plain", "taps", "plain"]
    assert not bool(hook._flag.numpy())  # fit never needed the flag
    for step, slot in enumerate(slots):  # the gradient slot changes on saved steps, and only there
        saved = step - step % 3
        applied = (rec.before[saved]["net/d1/kernel"] - rec.after[saved]["net/d1/kernel"]) / 0.1
        np.testing.assert_allclose(slot, applied, rtol=1e-4, atol=1e-6)
    _, plain = hook._train_variants
    hook.close()
    assert model.train_function is plain  # closing leaves later fits the variant that copies nothing
    trial = create_trial(str(tmp_path))
    # and the second epoch's end saves its loss and metrics in its last step (7), without a tap
    assert trial.steps() == [0, 3, 6, 7]
    assert trial.tensor_names(step=7) == ["loss", "mae"]
    assert trial.tensor(G1).steps() == [0, 3, 6]


def test_a_recompiled_model_still_saves_gradients_through_the_flag(keras_tf, tmp_path):
    """compile() drops fit's train function; the one Keras makes next has the flag's taps."""
    keras, _ = keras_tf
    from tornasole.keras import Hook

    model = tiny_model(keras, lr=0.1)
    x, y = regression_data()
    rec = _Recorder(keras, model)
    hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=2), include_collections=["gradients"])
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[rec.callback, hook])
    model.compile(optimizer=model.optimizer, loss="mse")  # same optimizer: its tap stays
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[rec.callback, hook])
    assert hook._train_variants is None  # Keras's own train function: the flag decides
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.tensor(G1).steps() == [0, 2, 4, 6]
    for step in (4, 6):  # saved by the second fit
        applied = (rec.before[step]["net/d1/kernel"] - rec.after[step]["net/d1/kernel"]) / 0.1
        np.testing.assert_allclose(trial.tensor(G1).value(step), applied, rtol=1e-4, atol=1e-6)


def test_disabled_hook_is_a_no_op_callback(keras_tf, tmp_path):
    keras, _ = keras_tf
    from tornasole.keras import Hook

    model = tiny_model(keras)
    x, y = regression_data()
    hook = Hook(str(tmp_path / "none"), enabled=False, include_collections=["gradients"])
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[hook])
    hook.close()
    assert not (tmp_path / "none").exists()


def test_subclassed_model_built_inside_fit_gets_its_gradients(keras_tf, tmp_path):
    keras, _ = keras_tf
    from tornasole.keras import Hook

    class Net(keras.Model):
        def __init__(self):
            super().__init__(name="sub")
            self.hidden = keras.layers.Dense(3, activation="relu", name="hidden")
            self.head = keras.layers.Dense(1, name="head")

        def call(self, x):
            return self.head(self.hidden(x))

    keras.utils.set_random_seed(0)
    model = Net()  # no weights until the first traced step
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    x, y = regression_data(8)
    rec = _Recorder(keras, model)
    hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=1), include_collections=["gradients"])
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[hook, rec.callback])
    hook.close()
    trial = create_trial(str(tmp_path))
    kernel = model.hidden.kernel.path
    assert trial.tensor(f"gradients/{kernel}Grad").steps() == [0, 1]
    applied = (rec.before[1][kernel] - rec.after[1][kernel]) / 0.1
    np.testing.assert_allclose(
        trial.tensor(f"gradients/{kernel}Grad").value(1), applied, rtol=1e-4, atol=1e-6
    )


def test_stop_signal_ends_fit_after_the_current_batch(keras_tf, tmp_path):
    keras, _ = keras_tf
    from tornasole.format.paths import STOP_SIGNAL
    from tornasole.keras import Hook

    tmp_path.mkdir(exist_ok=True)
    (tmp_path / STOP_SIGNAL).write_text("{}")
    hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=1), stop_check_interval=0.01)
    assert hook._stop_poller.wait(5)
    model = tiny_model(keras)
    x, y = regression_data()
    history = model.fit(x, y, batch_size=4, epochs=3, verbose=0, callbacks=[hook])
    hook.close()
    assert len(history.history["loss"]) == 1  # the first epoch ended at its first batch
    assert create_trial(str(tmp_path)).steps() == [0]


def test_save_all_saves_every_tensor_the_hook_knows(keras_tf, tmp_path):
    keras, _ = keras_tf
    from tornasole.keras import Hook

    model = tiny_model(keras)
    x, y = regression_data(8)
    hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=1), save_all=True)
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[hook])
    hook.close()
    names = set(create_trial(str(tmp_path)).tensor_names(step=1))
    assert {W1, B1, G1, "loss", "mae", "d1/inputs", "d1/outputs", "out/outputs"} <= names
    assert any(n.startswith("optimizer_variables/") for n in names)


def test_idle_batches_take_the_quiet_path_and_every_count_stays_right(keras_tf, tmp_path):
    """Steps that save nothing only move the counters; saved steps land where the full path puts them."""
    keras, _ = keras_tf
    from tornasole.keras import Hook

    model = tiny_model(keras)
    x, y = regression_data()
    hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=5))
    full = []
    begin = hook._batch_begin

    def counted(mode):
        full.append(mode)
        begin(mode)

    hook._batch_begin = counted
    fit = {"batch_size": 2, "verbose": 0, "shuffle": False, "callbacks": [hook]}
    model.fit(x, y, epochs=2, validation_data=(x[:8], y[:8]), validation_batch_size=2, **fit)
    model.evaluate(x, y, batch_size=4, verbose=0, callbacks=[hook])
    hook.close()
    # 2 epochs of 8 TRAIN batches and 4 validation batches, then 4 evaluate batches: 28 steps
    assert hook.step == 27
    # the full path: each saved step, the step after it, and the first step of a phase before its first
    # save (it works out where the next save is); the other 12 steps took the quiet path
    assert len(full) == 16
    trial = create_trial(str(tmp_path))
    # and each epoch's end saves its logs in its last TRAIN step (7; 15 saved anyway) and its last
    # validation step (EVAL 3 and 7)
    assert trial.steps(mode=ModeKeys.TRAIN) == [0, 5, 7, 10, 15]
    assert trial.steps(mode=ModeKeys.EVAL) == [0, 3, 5, 7, 10]
    # TRAIN mode steps 0-7 are global 0-7 and 8-15 are 12-19; EVAL 0-3 are 8-11, 4-7 are 20-23, 8-11 24-27
    assert trial.steps() == [0, 5, 7, 8, 11, 14, 19, 21, 23, 26]


@pytest.mark.parametrize("how", ["run_eagerly", "jit_compile", "mirrored"])
def test_gradients_of_fit_run_eagerly_compiled_by_xla_or_under_a_strategy(keras_tf, tmp_path, how):
    """Both traced variants of fit's train step (taps on, taps off) in each way Keras runs a step."""
    keras, tf = keras_tf
    from tornasole.keras import Hook

    if how == "mirrored":
        with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
            model = tiny_model(keras, lr=0.1)
    else:
        model = tiny_model(keras, lr=0.1)
        model.compile(optimizer=model.optimizer, loss="mse", **{how: True})
    x, y = regression_data()
    rec = _Recorder(keras, model)
    hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=2), include_collections=["gradients"])
    model.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False, callbacks=[rec.callback, hook])
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.tensor(G1).steps() == [0, 2, 4, 6]
    for step in (0, 2, 4, 6):
        applied = (rec.before[step]["net/d1/kernel"] - rec.after[step]["net/d1/kernel"]) / 0.1
        np.testing.assert_allclose(trial.tensor(G1).value(step), applied, rtol=1e-4, atol=1e-6)


def test_epoch_logs_are_saved_in_the_step_that_ends_the_epoch(keras_tf, tmp_path):
    keras, _ = keras_tf
    from tornasole.keras import Hook

    model = tiny_model(keras)
    x, y = regression_data()
    hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=100))
    # 3 epochs of 4 TRAIN batches; validation (2 batches) after the second epoch only
    history = model.fit(
        x,
        y,
        batch_size=4,
        epochs=3,
        verbose=0,
        shuffle=False,
        validation_data=(x[:8], y[:8]),
        validation_freq=2,
        callbacks=[hook],
    )
    hook.close()

    trial = create_trial(str(tmp_path))
    h = {k: [np.float32(x) for x in v] for k, v in history.history.items()}
    # the validation's epoch logs: in its last step (EVAL 1, global step 9); the training epoch's loss
    # and metrics are never written into an EVAL step, whose own batch values (EVAL 0) stay apart
    assert trial.tensor("val_loss").steps(mode=ModeKeys.EVAL) == [1]
    assert trial.tensor("val_loss").value(1, mode=ModeKeys.EVAL).item() == h["val_loss"][0]
    assert trial.tensor("val_mae").value(1, mode=ModeKeys.EVAL).item() == h["val_mae"][0]
    assert trial.tensor_names(step=9) == ["val_loss", "val_mae"]
    assert trial.tensor("loss").steps(mode=ModeKeys.EVAL) == [0]
    # every epoch's training loss and metrics: in its last TRAIN step (3, 7, 11), validated or not;
    # step 0 is the interval's own save
    assert trial.tensor("loss").steps(mode=ModeKeys.TRAIN) == [0, 3, 7, 11]
    for mode_step, epoch in ((3, 0), (7, 1), (11, 2)):
        assert trial.tensor("loss").value(mode_step, mode=ModeKeys.TRAIN).item() == h["loss"][epoch]
        assert trial.tensor("mae").value(mode_step, mode=ModeKeys.TRAIN).item() == h["mae"][epoch]
    assert "val_loss" in trial.tensor_names(collection="losses")


def test_epoch_logs_never_repeat_a_tag_the_batch_saved_in_the_same_step(keras_tf, tmp_path):
    """Every step saved (the last TRAIN step too), under a reduction config (losses and metrics stay
    raw): the epoch's end finds the batch's tags already in the step and writes nothing twice."""
    import json

    keras, _ = keras_tf
    from tornasole.keras import Hook

    model = tiny_model(keras)
    x, y = regression_data()
    hook = Hook(
        str(tmp_path),
        save_config=SaveConfig(save_interval=1),
        reduction_config=ReductionConfig(reductions=["mean"]),
    )
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, validation_data=(x[:8], y[:8]), callbacks=[hook])
    hook.close()
    index_files = sorted((tmp_path / "index").rglob("*.json"))
    assert len(index_files) == 6  # 4 TRAIN steps, 2 validation steps: no step added
    for f in index_files:
        names = [t["tensorname"] for t in json.loads(f.read_text())["tensor_payload"]]
        assert len(names) == len(set(names)), (f.name, names)
    trial = create_trial(str(tmp_path))
    # the last validation step: the batch's reductions and the epoch's val_ logs, once each
    assert trial.tensor_names(step=5) == ["loss", "mae", "val_loss", "val_mae"]


def test_a_batchnorm_beta_is_a_bias(keras_tf, tmp_path):
    """BatchNormalization's beta is its additive offset (PyTorch's ``bias``): saved in ``biases``, not in
    ``weights``, where WeightUpdateRatio read its first update relative to its zero start (the families
    benchmark's regression_keras: ratios of 12 to 4e6 at step 4 on healthy runs)."""
    keras, _ = keras_tf
    from tornasole.keras import Hook

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(3, name="d1"), keras.layers.BatchNormalization(name="bn")],
        name="net",
    )
    model.compile(optimizer="sgd", loss="mse")
    hook = Hook(
        str(tmp_path), save_config=SaveConfig(save_interval=1), include_collections=["weights", "biases"]
    )
    x = np.ones((8, 4), np.float32)
    model.fit(x, np.zeros((8, 3), np.float32), batch_size=4, epochs=1, verbose=0, callbacks=[hook])
    hook.close()
    trial = create_trial(str(tmp_path))
    assert "weights/net/bn/beta" in trial.tensor_names(collection="biases")
    assert "weights/net/bn/beta" not in trial.tensor_names(collection="weights")
    assert "weights/net/bn/gamma" in trial.tensor_names(collection="weights")

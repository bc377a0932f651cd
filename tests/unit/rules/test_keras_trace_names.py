"""The recommended rules read traces of the Keras hook as they read the PyTorch hook's: Keras names a bias
gradient ``gradients/net/fc1/biasGrad`` next to ``.../kernelGrad``, and saves the epoch's ``val_loss`` (in the
``losses`` collection) at EVAL steps only. Found by the Keras families of ``bench/detection/families``; each
test fails on the rule as it was before."""

from __future__ import annotations

import numpy as np

from tornasole.modes import EVAL, TRAIN
from tornasole.rules import invoke_rule
from tornasole.rules.generic import VanishingGradient

KERAS_COLLECTIONS = {"gradients": ["^gradients/"], "weights": ["^weights/"], "losses": ["(^|_)loss$"]}


def _keras_bn_fed_bias(weight_grad: float, loss: float = 0.7) -> dict:
    """A Keras Dense layer whose bias feeds a BatchNormalization (bias gradient ~1e-9), its kernel gradient
    given; TRAIN steps 0, 4, 8 then one validation step that saves ``val_loss``."""
    rng = np.random.default_rng(0)
    f32 = np.float32
    steps: dict = {}
    for s in (0, 4, 8):
        steps[s] = (
            TRAIN,
            s,
            {
                "gradients/net/fc1/kernelGrad": rng.normal(scale=weight_grad, size=(10, 8)).astype(f32),
                "gradients/net/fc1/biasGrad": rng.normal(scale=1e-9, size=8).astype(f32),
                "gradients/net/out/kernelGrad": rng.normal(scale=1e-2, size=(8, 1)).astype(f32),
                "gradients/net/out/biasGrad": rng.normal(scale=1e-2, size=1).astype(f32),
                "loss": np.float32(loss),
            },
        )
    steps[9] = (EVAL, 0, {"loss": np.float32(loss), "val_loss": np.float32(loss)})
    return steps


def test_bias_by_layer_pairs_a_keras_bias_with_its_kernel(trial_factory):
    trial = trial_factory(_keras_bn_fed_bias(weight_grad=1e-2), KERAS_COLLECTIONS)
    assert not invoke_rule(VanishingGradient(trial, bias_by_layer="True")).fired


def test_bias_by_layer_still_fires_when_the_keras_kernel_vanishes(trial_factory):
    trial = trial_factory(_keras_bn_fed_bias(weight_grad=1e-9), KERAS_COLLECTIONS)
    fired = invoke_rule(VanishingGradient(trial, bias_by_layer="True")).fired
    assert fired
    assert fired[0].values["tensor"] in ("gradients/net/fc1/biasGrad", "gradients/net/fc1/kernelGrad")


def test_first_layer_of_the_norm_ratio_is_a_kernel_not_a_keras_bias(trial_factory):
    """AUTOTRAINER's ratio is first layer / last layer of the kernels: a Keras ``biasGrad`` is no layer."""
    rng = np.random.default_rng(1)
    steps = {
        s: (
            TRAIN,
            s,
            {
                "gradients/net/fc1/biasGrad": np.full(8, 1e-7, np.float32),
                "gradients/net/fc1/kernelGrad": rng.normal(scale=1e-2, size=(10, 8)).astype(np.float32),
                "gradients/net/out/kernelGrad": rng.normal(scale=1e-2, size=(8, 1)).astype(np.float32),
            },
        )
        for s in (0, 4)
    }
    trial = trial_factory(steps, KERAS_COLLECTIONS)
    rule = VanishingGradient(trial, threshold="0", norm_ratio_threshold="0.001")
    assert not invoke_rule(rule).fired


def test_a_validation_only_loss_does_not_hide_the_training_loss_gate(trial_factory):
    """A converged Keras run: the training loss came down 99%, then the gradients went to 1e-9; ``val_loss``
    has no TRAIN step. Before, the gate read ``val_loss`` first, found "too few saved steps" and fired on the
    converged run's tiny gradients."""
    steps = {}
    for i, s in enumerate(range(0, 40, 4)):
        loss = np.float32(1.0 if i < 3 else 0.01)
        grad = np.full((4, 4), 1e-2 if i < 6 else 1e-9, np.float32)
        steps[s] = (TRAIN, s, {"gradients/net/fc1/kernelGrad": grad, "loss": loss})
    steps[41] = (EVAL, 0, {"loss": np.float32(0.01), "val_loss": np.float32(0.01)})
    trial = trial_factory(steps, KERAS_COLLECTIONS)
    rule = VanishingGradient(trial, loss_drop_percent="80", loss_window="3")
    assert not invoke_rule(rule).fired
    # the same run whose loss never came down still fires
    for s, (mode, ms, tensors) in list(steps.items()):
        if mode == TRAIN:
            steps[s] = (mode, ms, {**tensors, "loss": np.float32(1.0)})
    trial = trial_factory(steps, KERAS_COLLECTIONS)
    assert invoke_rule(VanishingGradient(trial, loss_drop_percent="80", loss_window="3")).fired


def test_skip_frozen_sees_a_keras_kernel_gradient(trial_factory):
    """A Keras layer whose kernel never moves although its gradient is saved (a learning rate of 0, or a
    layer the optimiser never sees) is not frozen on purpose: ``kernelGrad`` is the kernel's gradient.
    Before, every Keras weight looked gradient-less, so UnchangedWeights passed over all of them."""
    from tornasole.rules.generic import UnchangedTensor

    kernel = np.ones((4, 4), np.float32)
    steps = {
        s: (
            TRAIN,
            s,
            {
                "weights/net/fc1/kernel": kernel,
                "gradients/net/fc1/kernelGrad": np.full((4, 4), 0.1, np.float32),
            },
        )
        for s in (0, 4, 8)
    }
    trial = trial_factory(steps, KERAS_COLLECTIONS)
    fired = invoke_rule(UnchangedTensor(trial, collection_names="weights", num_steps="3", skip_frozen="True"))
    assert [o.step for o in fired.fired] == [8]
    # the same kernel saved without its gradient (trainable=False) is frozen on purpose
    frozen = {
        s: (TRAIN, s, {"weights/net/fc1/kernel": kernel, "gradients/net/out/kernelGrad": kernel})
        for s in (0, 4, 8)
    }
    trial = trial_factory(frozen, KERAS_COLLECTIONS)
    assert not invoke_rule(
        UnchangedTensor(trial, tensor_regex="weights/net/fc1/kernel", num_steps="3", skip_frozen="True")
    ).fired

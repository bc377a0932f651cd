"""ClassifierNoBetterThanPrior on real Keras runs: the Keras hook saves what the compiled loss sees
(``predictions``, ``labels``, ``batch_loss/BinaryCrossentropy``) in fit's validation passes, and the rule
fires on a sigmoid classifier trained on labels shuffled against its inputs, not on its twin trained on
its own labels."""

from __future__ import annotations

import numpy as np

from tornasole import modes
from tornasole.core.save_config import SaveConfig
from tornasole.rules import invoke_rule, recommended_rules
from tornasole.rules.builtin.classifier_no_better_than_prior import ClassifierNoBetterThanPrior
from tornasole.trials import create_trial

(_CONFIG,) = [r for r in recommended_rules() if r["RuleConfigurationName"] == "ClassifierNoBetterThanPrior"]
PARAMS = {k: v for k, v in _CONFIG["RuleParameters"].items() if k != "rule_to_invoke"}


def _fit_binary(keras, out, *, shuffled: bool, epochs: int = 6):
    """A 4 -> 16 -> 1 sigmoid classifier (Adam, binary cross-entropy) fit for ``epochs`` epochs of 8
    batches with a validation pass of 2 batches each; ``shuffled``: the training labels permuted against
    the inputs (validation keeps its own)."""
    from tornasole.keras import Hook

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x, xv = rng.normal(size=(128, 4)).astype(np.float32), rng.normal(size=(64, 4)).astype(np.float32)

    def label(z):
        return (z[:, 0] + 0.5 * z[:, 1] > -0.3).astype(np.float32)

    y, yv = label(x), label(xv)
    if shuffled:
        y = rng.permutation(y)
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy")
    hook = Hook(
        str(out), save_config=SaveConfig(save_interval=1), include_collections=["losses", "loss_inputs"]
    )
    hook.get_collection("loss_inputs").include(r"^(predictions|labels)$|^batch_loss/")
    model.fit(
        x,
        y,
        batch_size=16,
        epochs=epochs,
        verbose=0,
        shuffle=False,
        validation_data=(xv, yv),
        callbacks=[hook],
    )
    hook.close()
    return create_trial(str(out))


def test_a_keras_classifier_on_shuffled_labels_fires_and_its_twin_does_not(keras_tf, tmp_path):
    keras, _ = keras_tf
    broken = _fit_binary(keras, tmp_path / "shuffled", shuffled=True)
    fired = invoke_rule(ClassifierNoBetterThanPrior(broken, **PARAMS)).fired
    assert fired
    assert "predictions against labels (batch_loss/BinaryCrossentropy)" in fired[0].details
    assert broken.mode(fired[0].step) == modes.EVAL

    healthy = invoke_rule(
        ClassifierNoBetterThanPrior(_fit_binary(keras, tmp_path / "own", shuffled=False), **PARAMS)
    )
    assert healthy.fired == []
    assert healthy.steps_evaluated > 0

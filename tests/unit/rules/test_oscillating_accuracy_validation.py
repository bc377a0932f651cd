"""OscillatingAccuracy's ``validation_regex``: where the run saves a validation accuracy, it must oscillate
too (issue 29: under mixup the training accuracy is counted against mixed targets and swings on a healthy
run, while the accuracy on clean validation data rises; a learning rate too high swings both)."""

from __future__ import annotations

import numpy as np
from hook_trials import epochs
from test_oscillating_accuracy_noise import DEMO as TRAIN_SWINGS  # 700 samples, swings of 2.8-5.9 SE

from tornasole.rules import invoke_rule
from tornasole.rules.builtin.recommended import recommended_rules
from tornasole.rules.generic import OscillatingAccuracy

#: a model whose accuracy on 360 clean validation samples rises, as a healthy mixup CNN's does
VAL_RISING = [0.52, 0.70, 0.79, 0.85, 0.88, 0.90, 0.92, 0.93, 0.94, 0.95, 0.955, 0.96, 0.962, 0.965, 0.97]
#: the same validation set under a learning rate too high: the model itself swings, by 0.10-0.25
VAL_SWINGS = [0.60, 0.75, 0.50, 0.72, 0.55, 0.80, 0.52, 0.78, 0.60, 0.82, 0.57, 0.79, 0.55, 0.80, 0.56]
#: the standard error of an accuracy near 0.9 over 360 samples is 0.016: swings of 0.03-0.04 are noise
VAL_NOISY = [
    0.88,
    0.914,
    0.883,
    0.917,
    0.886,
    0.919,
    0.889,
    0.92,
    0.89,
    0.922,
    0.892,
    0.925,
    0.894,
    0.926,
    0.9,
]


def _counted(values: list[float], n: int) -> list[float]:
    return [round(v * n) / n for v in values]


def _run(
    path: str, train_acc: list[float], val: list[float] | None, name: str = "accuracy", batches: int = 2
):
    """Epoch e: 4 TRAIN steps, ``epoch_accuracy`` at the last; then a validation pass of ``batches`` EVAL
    steps, each saving ``name`` (the pass's accuracy; none saved when ``val`` is None). Epoch e's last TRAIN
    step is global step (4 + batches) e + 3."""
    train = [
        [{"loss": np.float32(0.7)}] * 3 + [{"loss": np.float32(0.7), "epoch_accuracy": np.float32(a)}]
        for a in train_acc
    ]
    evals = [
        [{"loss": np.float32(0.5)} | ({} if val is None else {name: np.float32(val[e])})] * batches
        for e in range(len(train_acc))
    ]
    return epochs(path, train, evals)


def _recommended() -> dict[str, str]:
    (conf,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == "OscillatingAccuracy"]
    return {k: v for k, v in conf["RuleParameters"].items() if k != "rule_to_invoke"}


def test_the_recommended_set_asks_the_validation_accuracy():
    assert _recommended()["validation_regex"] == ".*acc(uracy)?$"


def test_a_training_accuracy_that_swings_over_a_rising_validation_accuracy_is_quiet(tmp_path):
    trial = _run(str(tmp_path / "mixup"), _counted(TRAIN_SWINGS, 700), _counted(VAL_RISING, 360))
    # AUTOTRAINER's criterion on the training accuracy alone fires at the 15th epoch's check
    assert invoke_rule(OscillatingAccuracy(trial, noise_z="2")).first_step == 6 * 14 + 3
    quiet = invoke_rule(OscillatingAccuracy(trial, **_recommended()))
    assert quiet.fired == []
    assert quiet.steps_evaluated > 0


def test_a_model_that_swings_on_validation_too_fires_at_the_same_step(tmp_path):
    trial = _run(str(tmp_path / "lr_high"), _counted(TRAIN_SWINGS, 700), _counted(VAL_SWINGS, 360))
    plain = invoke_rule(OscillatingAccuracy(trial, noise_z="2")).fired[0]
    asked = invoke_rule(OscillatingAccuracy(trial, **_recommended())).fired[0]
    assert asked.step == plain.step == 6 * 14 + 3
    assert "the validation accuracy accuracy (EVAL) oscillates too" in asked.details
    assert "in 14 passes" in asked.details  # the passes that ended before the judged TRAIN step


def test_validation_swings_within_the_sampling_noise_do_not_confirm(tmp_path):
    # Keras saves val_accuracy once per pass, an exact k / 360: the gate reads the 360 samples from it
    trial = _run(
        str(tmp_path / "keras"), _counted(TRAIN_SWINGS, 700), _counted(VAL_NOISY, 360), "val_accuracy", 1
    )
    assert invoke_rule(OscillatingAccuracy(trial, noise_z="2", validation_regex=".*acc(uracy)?$")).fired == []
    # without the noise gate the same swings (>= 0.03) count: AUTOTRAINER's min_swing on both
    assert invoke_rule(OscillatingAccuracy(trial, validation_regex=".*acc(uracy)?$")).fired != []


def test_a_run_without_a_validation_accuracy_is_judged_on_the_training_accuracy(tmp_path):
    trial = _run(str(tmp_path / "no_val"), _counted(TRAIN_SWINGS, 700), None)
    plain = invoke_rule(OscillatingAccuracy(trial, noise_z="2")).first_step
    assert invoke_rule(OscillatingAccuracy(trial, **_recommended())).first_step == plain == 6 * 14 + 3


def test_off_by_default_as_autotrainer_states_it(tmp_path):
    trial = _run(str(tmp_path / "default"), _counted(TRAIN_SWINGS, 700), _counted(VAL_RISING, 360))
    assert OscillatingAccuracy(trial).validation_regex is None
    assert invoke_rule(OscillatingAccuracy(trial)).fired != []


def test_a_pass_of_several_batches_counts_the_samples_of_each(tmp_path):
    # PyTorch-style: each pass saves two batch accuracies, of 64 and 40 samples (104 in all). The passes'
    # means alternate 0.750 and 0.847: 1.7 standard errors of an accuracy over 104 samples, no confirmation;
    # the means' own granularity (multiples of 1/640) would have read 640 samples and 4.3 standard errors
    first, second = [48 / 64, 54 / 64], [30 / 40, 34 / 40]
    train = [
        [{"loss": np.float32(0.7)}] * 3 + [{"loss": np.float32(0.7), "epoch_accuracy": np.float32(a)}]
        for a in _counted(TRAIN_SWINGS, 700)
    ]
    evals = [
        [{"accuracy": np.float32(first[e % 2])}, {"accuracy": np.float32(second[e % 2])}]
        for e in range(len(TRAIN_SWINGS))
    ]
    trial = epochs(str(tmp_path / "batches"), train, evals)
    assert invoke_rule(OscillatingAccuracy(trial, **_recommended())).fired == []
    # the same passes with the gate's noise test off: AUTOTRAINER's min_swing confirms them
    params = {**_recommended(), "noise_z": "0"}
    assert invoke_rule(OscillatingAccuracy(trial, **params)).fired != []

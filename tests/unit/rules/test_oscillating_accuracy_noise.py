"""OscillatingAccuracy's ``noise_z``: a swing of the epoch accuracy no larger than the sampling noise of an
accuracy over the samples it counts is not an oscillation (issue 29: the wine and iris families, 120-138
training samples). The sample count is read from the values' granularity (a saved float32 ``k / n``)."""

from __future__ import annotations

import numpy as np
import pytest
from hook_trials import epochs

from tornasole.exceptions import RuleParameterError
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.oscillating_accuracy import accuracy_denominator, paired_swings, swing_z
from tornasole.rules.builtin.recommended import recommended_rules
from tornasole.rules.generic import OscillatingAccuracy

#: a healthy net's first 15 epochs on wine's 138 training samples (BatchNorm, dropout 0.2, batch 4): swings
#: of 3 to 11 predictions while it learns (bench/detection, wine ``noisy_small_batch`` seed 0)
WINE_COUNTS = [42, 38, 69, 102, 111, 117, 115, 111, 116, 121, 116, 117, 120, 124, 113]
#: a PyTorch re-make of AUTOTRAINER's ``Oscillating_Loss_Case`` (Dense(50, relu), SGD 0.01 with momentum
#: 0.9, batch 1) on its 700 training blobs: the accuracy swings by 2.8 to 5.9 standard errors
DEMO = [
    0.693,
    0.720,
    0.570,
    0.586,
    0.604,
    0.609,
    0.539,
    0.533,
    0.493,
    0.477,
    0.610,
    0.596,
    0.639,
    0.540,
    0.570,
]


def _run(path: str, epoch_acc: list[float]):
    """Epochs of 4 TRAIN steps with ``epoch_accuracy`` at each epoch's last, then one validation step.
    Epoch e is global steps 5e..5e+3 (TRAIN) and 5e+4 (EVAL)."""
    train = [
        [{"loss": np.float32(0.7)}] * 3 + [{"loss": np.float32(0.7), "epoch_accuracy": np.float32(a)}]
        for a in epoch_acc
    ]
    return epochs(path, train, [[{"loss": np.float32(0.7)}]] * len(epoch_acc))


def _recommended() -> dict[str, str]:
    (conf,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == "OscillatingAccuracy"]
    return {k: v for k, v in conf["RuleParameters"].items() if k != "rule_to_invoke"}


def test_the_sample_count_is_read_from_the_accuracy_granularity():
    assert accuracy_denominator([float(np.float32(c / 138)) for c in WINE_COUNTS]) == 138
    assert accuracy_denominator([float(np.float32(k / 700)) for k in (485, 504, 399)]) == 700
    # a divisor of the count when every value shares it (never more noise under-estimated)
    assert accuracy_denominator([0.5, 0.25, 0.75]) == 4
    # not a fraction of at most 4096 samples (a large training set), or not a fraction at all
    assert accuracy_denominator([float(np.float32(k / 60000)) for k in (54001, 55003, 53999)]) is None
    assert accuracy_denominator([45.0, 50.0]) is None
    assert accuracy_denominator([]) is None


def test_swing_z_is_the_two_proportion_statistic():
    # 0.6 against 0.5 over 100 samples each: pooled 0.55, standard error sqrt(2 x 0.2475 / 100) = 0.0704
    assert swing_z(0.6, 0.5, 100) == pytest.approx(0.1 / 0.07036, rel=1e-3)
    assert paired_swings([0.5, 0.6, 0.5, 0.6, 0.5], 0.03, n=100, noise_z=1.4) == [(1, 2)]
    assert paired_swings([0.5, 0.6, 0.5, 0.6, 0.5], 0.03, n=100, noise_z=1.5) == []
    # without a sample count the gate is off: AUTOTRAINER's min_swing alone
    assert paired_swings([0.5, 0.6, 0.5, 0.6, 0.5], 0.03, n=None, noise_z=2) == [(1, 2)]


def test_small_training_set_noise_is_no_oscillation(tmp_path):
    trial = _run(str(tmp_path / "wine"), [c / 138 for c in WINE_COUNTS])
    # AUTOTRAINER's criterion alone fires at the 15th epoch (3 swings of >= 0.03, i.e. >= 5 predictions)
    assert invoke_rule(OscillatingAccuracy(trial)).first_step == 73
    # none of them is 2 standard errors of an accuracy over 138 samples: quiet (failed before: no noise_z)
    quiet = invoke_rule(OscillatingAccuracy(trial, **_recommended()))
    assert quiet.fired == []
    assert quiet.steps_evaluated > 0  # judged, not skipped


def test_an_oscillation_beyond_the_sampling_noise_still_fires(tmp_path):
    trial = _run(str(tmp_path / "demo"), [round(a * 700) / 700 for a in DEMO])
    plain = invoke_rule(OscillatingAccuracy(trial)).fired[0]
    gated = invoke_rule(OscillatingAccuracy(trial, **_recommended())).fired[0]
    assert gated.step == plain.step == 73  # the 15th epoch's last TRAIN step, as without the gate
    assert "each >= noise_z 2 standard errors of an accuracy over 700 samples" in gated.details


def test_a_large_training_set_keeps_autotrainers_min_swing(tmp_path):
    # 0.04 swings on 60,000 samples: 20 standard errors; no count <= 4096 is read, the gate stays off
    accs = [k / 60000 for k in (30011, 33007, 30613, 33001, 30587, 32999, 30607)]
    trial = _run(str(tmp_path / "mnist"), accs)
    assert invoke_rule(OscillatingAccuracy(trial, **_recommended())).first_step == 28


def test_noise_z_must_not_be_negative(tmp_path):
    trial = _run(str(tmp_path / "t"), [0.5, 0.6, 0.5])
    with pytest.raises(RuleParameterError, match="noise_z"):
        OscillatingAccuracy(trial, noise_z="-1")

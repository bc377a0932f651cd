"""OscillatingAccuracy (AUTOTRAINER's unstable-training criterion on the per-epoch training accuracy) and
SlowConvergence's training-accuracy condition, which read the same per-epoch values."""

from __future__ import annotations

import numpy as np
import pytest
from hook_trials import epochs

from tornasole.exceptions import RuleParameterError
from tornasole.rules import invoke_rule, rule_configs
from tornasole.rules.builtin.oscillating_accuracy import paired_swings
from tornasole.rules.generic import OscillatingAccuracy, SlowConvergence, ZeroGradients


def _run(path, epoch_acc, val_acc=None, batches=4, name="epoch_accuracy", batch_acc=None):
    """Epochs of ``batches`` TRAIN steps (loss, and ``batch_acc`` alternating around 0.5 when given) with
    ``name`` saved at each epoch's last TRAIN step only, then one validation step (loss, and ``accuracy``
    from ``val_acc`` when given). Epoch e is global steps 5e..5e+3 (TRAIN) and 5e+4 (EVAL)."""
    train, evals = [], []
    for e, a in enumerate(epoch_acc):
        steps = []
        for b in range(batches):
            tensors = {"loss": np.float32(0.7)}
            if batch_acc:
                tensors["accuracy"] = np.float32(0.5 + (0.2 if b % 2 else -0.2))
            if b == batches - 1:
                tensors[name] = np.float32(a)
            steps.append(tensors)
        train.append(steps)
        ev = {"loss": np.float32(0.7)}
        if val_acc is not None:
            ev["accuracy"] = np.float32(val_acc[e])
        evals.append([ev])
    return epochs(path, train, evals)


def test_fires_when_the_epoch_accuracy_swings_judged_every_third_epoch(tmp_path):
    trial = _run(str(tmp_path / "a"), [0.5, 0.6, 0.5, 0.6, 0.5, 0.6, 0.5])
    first = invoke_rule(OscillatingAccuracy(trial)).fired[0]
    # 3 epochs: one inner point, no pair; epochs 4 and 5 are not check epochs; at epoch 6 (its last TRAIN
    # step, global 28) the maxima at epochs 2, 4 pair with the minima at 3, 5: 2 >= 0.2 x 6
    assert first.step == 28
    assert first.mode == "TRAIN"
    assert first.values["value"] == 2
    assert first.values["points"] == 6
    details = first.details
    assert "epoch_accuracy (TRAIN): 2 paired local maxima and minima of the per-epoch accuracy" in details
    assert "differ by >= min_swing 0.03 in 6 epochs (>= swing_fraction 0.2 x 6 = 1.2)" in details
    assert "last: 0.6 (step 8) / 0.5 (step 13), 0.6 (step 18) / 0.5 (step 23)" in details
    # judged every epoch instead, the first pair is enough at epoch 4 (one pair >= 0.2 x 4)
    assert invoke_rule(OscillatingAccuracy(trial, check_every="1")).first_step == 18
    # swings smaller than min_swing are not swings
    assert invoke_rule(OscillatingAccuracy(trial, min_swing="0.2")).fired == []


def test_quiet_on_a_rising_or_noisy_but_learning_accuracy(tmp_path):
    rising = _run(str(tmp_path / "rising"), [0.5, 0.6, 0.7, 0.75, 0.8, 0.82, 0.85, 0.86, 0.88])
    assert invoke_rule(OscillatingAccuracy(rising)).fired == []
    # one dip of 0.02 in nine epochs: under min_swing, and one pair would be under 0.2 x 9 anyway
    dip = _run(str(tmp_path / "dip"), [0.5, 0.6, 0.7, 0.68, 0.8, 0.82, 0.85, 0.86, 0.88])
    assert invoke_rule(OscillatingAccuracy(dip)).fired == []
    # a batch's own accuracy swings by 0.4 every step; the default tensor_regex does not read it
    noisy = _run(str(tmp_path / "noisy"), [0.5, 0.6, 0.7, 0.75, 0.8, 0.82], batch_acc=True)
    assert invoke_rule(OscillatingAccuracy(noisy)).fired == []


def _running(path, epoch_acc, batches=4):
    """Keras's way: ``accuracy`` at every TRAIN step, the epoch's running mean (here 0.1 below the epoch's
    value per batch still to come), its last step the epoch's own value; one validation step per epoch.
    Epoch e is global steps 5e..5e+3 (TRAIN) and 5e+4 (EVAL)."""
    train = [
        [{"accuracy": np.float32(a - 0.1 * (batches - 1 - b))} for b in range(batches)] for a in epoch_acc
    ]
    return epochs(path, train, [[{"loss": np.float32(0.7)}]] * len(epoch_acc))


def test_a_running_accuracy_is_judged_on_ended_epochs_only(tmp_path):
    # learning after a bad first epoch; in epoch 5 the running mean starts 0.3 below the epoch's 0.9
    learning = _running(str(tmp_path / "learning"), [0.6, 0.5, 0.7, 0.8, 0.85, 0.9, 0.92])
    # judging the epoch in progress, step 25's 0.6 would make epoch 4 a maximum paired with epoch 1's dip
    rule = OscillatingAccuracy(learning, tensor_regex="accuracy", swing_fraction="0.1")
    assert invoke_rule(rule).fired == []
    # a run that oscillates is caught at the first step after its sixth epoch ended (global 30)
    swinging = _running(str(tmp_path / "swinging"), [0.5, 0.6, 0.5, 0.6, 0.5, 0.6, 0.5])
    first = invoke_rule(OscillatingAccuracy(swinging, tensor_regex="accuracy")).fired[0]
    assert (first.step, first.values["points"], first.values["value"]) == (30, 6, 2)
    assert "last: 0.6 (step 8) / 0.5 (step 13), 0.6 (step 18) / 0.5 (step 23)" in first.details


def test_per_step_reads_a_run_without_validation_passes(tmp_path):
    values = [0.5, 0.6, 0.5, 0.6, 0.5, 0.6]
    trial = epochs(str(tmp_path / "a"), [[{"epoch_accuracy": np.float32(v)} for v in values]])
    # one TRAIN phase: without per_step it is one epoch and never judged
    assert invoke_rule(OscillatingAccuracy(trial)).fired == []
    assert invoke_rule(OscillatingAccuracy(trial, per_step="True")).first_step == 5


def test_a_run_without_an_epoch_accuracy_is_skipped_never_judged_healthy(tmp_path):
    trial = epochs(
        str(tmp_path / "a"), [[{"loss": np.float32(0.7)}] * 4] * 3, [[{"loss": np.float32(0.7)}]] * 3
    )
    summary = invoke_rule(OscillatingAccuracy(trial))
    assert summary.fired == []
    assert summary.steps_evaluated == 0
    assert summary.steps_skipped == 15
    # a NaN epoch value is not a point: nothing is judged past it
    nan = _run(str(tmp_path / "nan"), [0.5, float("nan"), 0.5, 0.6, 0.5, 0.6])
    assert invoke_rule(OscillatingAccuracy(nan)).fired == []


def test_slow_convergence_also_requires_a_flat_training_accuracy_when_asked(tmp_path):
    flat_val = [0.50, 0.502, 0.503, 0.503]
    # a slow starter: the validation accuracy sits still while the training accuracy climbs 0.03 an epoch
    climbing = _run(str(tmp_path / "climb"), [0.40, 0.43, 0.46, 0.49], val_acc=flat_val)
    assert invoke_rule(SlowConvergence(climbing)).first_step == 14  # unset: not checked (the default)
    gated = SlowConvergence(climbing, train_tensor_regex=".*epoch_accuracy")
    assert invoke_rule(gated).fired == []
    # both flat: fires at the third pass, and the report says what the training accuracy did
    stuck = _run(str(tmp_path / "stuck"), [0.40, 0.405, 0.40, 0.405], val_acc=flat_val)
    fired = invoke_rule(SlowConvergence(stuck, train_tensor_regex=".*epoch_accuracy")).fired[0]
    assert fired.step == 14
    assert (
        "the training accuracy was flat too (epoch_accuracy rose by at most 0.005 in 3 epochs)"
        in fired.details
    )
    # no tensor matches: judged without it, and the report says so
    other = SlowConvergence(stuck, train_tensor_regex="train_top1")
    assert "no per-epoch training accuracy saved: judged without it" in invoke_rule(other).fired[0].details


def test_parameters_are_checked_and_the_config_builder_exists():
    for bad in ({"min_points": "0"}, {"check_every": "0"}, {"min_swing": "0"}, {"swing_fraction": "-1"}):
        with pytest.raises(RuleParameterError, match=next(iter(bad))):
            OscillatingAccuracy(None, **bad)
    config = rule_configs.oscillating_accuracy(min_swing=0.05)
    assert config["DebugRuleConfiguration"]["RuleParameters"] == {
        "rule_to_invoke": "OscillatingAccuracy",
        "min_swing": "0.05",
    }
    assert paired_swings([0.5, 0.6, 0.5, 0.6, 0.5], 0.03) == [(1, 2)]
    assert paired_swings([0.5, 0.6, 0.6, 0.5], 0.03) == []  # a flat top: two maxima, no minimum


def _dead_run(path, val_acc, zero_epochs=(0,), epochs_=None):
    """Epochs of 4 TRAIN steps saving two gradient tensors (all zero in ``zero_epochs``' first step, else
    ones) and one validation step saving ``accuracy``; epoch e is global steps 5e..5e+3 and 5e+4."""
    train, evals = [], []
    for e, a in enumerate(val_acc):
        steps = []
        for b in range(4):
            g = np.zeros(8) if (e in zero_epochs and b == 0) else np.ones(8)
            steps.append({"gradients/w": g, "gradients/b": g[:2], "loss": np.float32(0.7)})
        train.append(steps)
        evals.append([{"accuracy": np.float32(a), "loss": np.float32(0.7)}])
    return epochs(path, train, evals)


def test_zero_gradients_fires_at_a_check_where_the_model_is_not_converging(tmp_path):
    stuck = _dead_run(str(tmp_path / "stuck"), [0.30, 0.35, 0.40, 0.45, 0.5, 0.55])
    first = invoke_rule(ZeroGradients(stuck)).fired[0]
    # the symptom is at step 0 (every entry 0); the first check is the third validation pass, global 14
    assert first.step == 14
    assert first.mode == "EVAL"
    assert first.values["symptom_step"] == 0
    assert (
        "at step 0 (TRAIN 0) 100% of the 10 entries of 2 gradient tensor(s) were exactly 0" in first.details
    )
    assert "in 3 validation passes the best accuracy is 0.4 < max_accuracy 0.6" in first.details
    # a net that learns through its dead start is not flagged (best pass 0.7 at the check)
    learns = _dead_run(str(tmp_path / "learns"), [0.30, 0.7, 0.8, 0.85, 0.9, 0.9])
    assert invoke_rule(ZeroGradients(learns)).fired == []
    # no symptom: a slow run alone is SlowConvergence's to report
    alive = _dead_run(str(tmp_path / "alive"), [0.30, 0.35, 0.40], zero_epochs=())
    assert invoke_rule(ZeroGradients(alive)).fired == []
    # a symptom after the third pass waits for the sixth, judged on all six
    late = _dead_run(str(tmp_path / "late"), [0.30, 0.35, 0.40, 0.45, 0.5, 0.55], zero_epochs=(3,))
    assert invoke_rule(ZeroGradients(late)).first_step == 29
    # 20% zeros (the bias tensor) is under the threshold; all-ones never is
    half = _dead_run(str(tmp_path / "half"), [0.3, 0.3, 0.3])
    assert invoke_rule(ZeroGradients(half, tensor_regex="gradients/b", collection_names="")).first_step == 14


def test_zero_gradients_needs_a_validation_accuracy_and_checks_its_parameters(tmp_path):
    loss = {"loss": np.float32(0.7), "gradients/w": np.zeros(4)}
    trial = epochs(str(tmp_path / "a"), [[loss] * 4] * 3, [[{"loss": np.float32(0.7)}]] * 3)
    summary = invoke_rule(ZeroGradients(trial))
    assert summary.fired == []
    assert summary.steps_evaluated == 0
    assert summary.steps_skipped == 15
    for bad in ({"threshold": "0"}, {"threshold": "101"}, {"min_passes": "0"}, {"check_every": "0"}):
        with pytest.raises(RuleParameterError, match=next(iter(bad))):
            ZeroGradients(None, **bad)
    assert rule_configs.zero_gradients(threshold=80)["DebugRuleConfiguration"]["RuleParameters"] == {
        "rule_to_invoke": "ZeroGradients",
        "threshold": "80",
    }

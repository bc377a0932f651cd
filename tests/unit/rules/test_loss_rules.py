"""Loss rules: LossNotDecreasing, Overfit, Overtraining (TRAIN/EVAL modes)."""

from __future__ import annotations

import numpy as np
import pytest
from rules_helpers import train_mlp

from tornasole.exceptions import RuleParameterError
from tornasole.modes import EVAL, TRAIN
from tornasole.rules import invoke_rule
from tornasole.rules.generic import LossNotDecreasing, Overfit, Overtraining
from tornasole.trials import create_trial


def _losses(values, mode=None):
    return {
        s: ((mode, s, {"loss": np.float32(v)}) if mode else {"loss": np.float32(v)})
        for s, v in enumerate(values)
    }


def test_loss_not_decreasing_quiet_on_real_training(trial_factory):
    trial = trial_factory({s: {"loss": v["loss"]} for s, v in train_mlp(steps=6, lr=0.001).items()})
    assert invoke_rule(LossNotDecreasing(trial, num_steps="2")).fired == []


def test_loss_not_decreasing_fires_at_the_first_evaluation_point_where_loss_plateaus(trial_factory):
    trial = trial_factory(_losses([10, 9, 8, 7, 7, 7, 7, 7]))
    summary = invoke_rule(LossNotDecreasing(trial, num_steps="2"))
    # evaluation points 0, 2, 4, 6: at 4 the loss (7) is below that of 2 (8); at 6 it equals that of 4
    assert summary.first_step == 6
    assert summary.fired_steps == [6]
    assert "loss (GLOBAL step 6)=7 is not 0.1% below 7 at step 4" in summary.fired[0].details


def test_loss_not_decreasing_uses_train_mode_when_only_train_saved_and_respects_mode(trial_factory):
    steps = {0: (TRAIN, 0, {"loss": 5.0}), 1: (TRAIN, 1, {"loss": 5.0}), 2: (EVAL, 0, {"x": 1.0})}
    trial = trial_factory(steps)
    assert invoke_rule(LossNotDecreasing(trial, num_steps="1")).first_step == 1
    assert invoke_rule(LossNotDecreasing(trial, num_steps="1", mode="EVAL")).fired == []


def test_loss_not_decreasing_rebound_above_lowest(trial_factory):
    trial = trial_factory(_losses([10, 1, 5, 3]))
    # diff check alone: 3 < 5 at step 3; but 3 is > 5% above the lowest (1)
    summary = invoke_rule(LossNotDecreasing(trial, num_steps="1"))
    assert summary.fired_steps == [2, 3]
    assert "above the lowest loss 1" in summary.fired[1].details


def test_loss_not_decreasing_fires_when_the_loss_became_nan(trial_factory):
    # a diverged run: the loss is NaN at the second evaluation point, which is not a decrease
    trial = trial_factory(_losses([10, 9, float("nan"), float("nan")]))
    summary = invoke_rule(LossNotDecreasing(trial, num_steps="2"))
    assert summary.first_step == 2
    assert "loss (GLOBAL step 2)=nan is not 0.1% below 10" in summary.fired[0].details


def _train_eval(train, evals):
    """Alternate TRAIN and EVAL steps: global 2k is TRAIN k, 2k+1 is EVAL k."""
    out = {}
    for k, (t, e) in enumerate(zip(train, evals)):
        out[2 * k] = (TRAIN, k, {"loss": np.float32(t)})
        out[2 * k + 1] = (EVAL, k, {"loss": np.float32(e)})
    return out


def test_overfit_fires_when_eval_loss_rises_while_train_loss_falls(trial_factory):
    trial = trial_factory(_train_eval([1.0, 0.8, 0.6, 0.4], [1.0, 0.9, 1.0, 1.2]))
    summary = invoke_rule(Overfit(trial, patience="2"))
    # ratios at EVAL steps 1, 3, 5, 7: 0, 0.125, 0.667, 2.0 -> two in a row above 0.1 first at global 5
    assert summary.first_step == 5
    assert summary.fired[0].mode == "EVAL"
    assert summary.fired[0].mode_step == 2


def test_overfit_quiet_when_losses_track_each_other(trial_factory):
    trial = trial_factory(_train_eval([1.0, 0.8, 0.6], [1.05, 0.85, 0.62]))
    assert invoke_rule(Overfit(trial)).fired == []


def test_overtraining_fires_when_train_loss_stops_improving(trial_factory):
    trial = trial_factory(_losses([5, 4, 3, 3, 3, 3], mode=TRAIN))
    summary = invoke_rule(Overtraining(trial, patience_train="3"))
    assert summary.first_step == 5


def test_overtraining_quiet_while_improving(trial_factory):
    trial = trial_factory(_losses([5, 4, 3, 2, 1, 0.5], mode=TRAIN))
    assert invoke_rule(Overtraining(trial, patience_train="3")).fired == []


def test_loss_not_decreasing_agrees_between_whole_run_and_a_short_history_window(trial_factory):
    # GIVEN losses saved every 3 steps; evaluation points are the first saved step of each 10-step bucket
    losses = {s: {"loss": np.float32(10 - 0.5 * s if s < 30 else 5)} for s in range(0, 60, 3)}
    trial = trial_factory(losses)
    rule = LossNotDecreasing(trial, num_steps="10")
    whole = invoke_rule(rule).fired_steps
    assert whole == [30, 42, 51]
    # WHEN each step is evaluated on a trial that holds only history_steps() earlier saved steps
    windowed = []
    steps = sorted(losses)
    for i, s in enumerate(steps):
        start = steps[max(0, i - rule.history_steps())]
        window = create_trial(trial.path, range_steps=(start, s + 1), collections_timeout=0.1)
        if LossNotDecreasing(window, num_steps="10").evaluate(s).fired:
            windowed.append(s)
    # THEN the same steps fire
    assert windowed == whole
    # and with patience, whose look-back history_steps() covers
    patient = LossNotDecreasing(trial, num_steps="10", patience="2")
    whole = invoke_rule(patient).fired_steps
    assert whole == [30, 42, 51]  # 30: the rebound check, which does not wait
    windowed = []
    for i, s in enumerate(steps):
        start = steps[max(0, i - patient.history_steps())]
        window = create_trial(trial.path, range_steps=(start, s + 1), collections_timeout=0.1)
        if LossNotDecreasing(window, num_steps="10", patience="2").evaluate(s).fired:
            windowed.append(s)
    assert windowed == whole


def test_loss_not_decreasing_first_reference_is_quiet_once_the_loss_came_down(trial_factory):
    # A run that came down and then sits on a noisy plateau: evaluation points 0, 4, 8, 12 (buckets of
    # 4); the window ending at 12 (0.9625) is back near the first window's mean (1), but the one ending
    # at 8 (0.6) was well below it: the loss came down.
    values = [1.0] * 4 + [0.6] * 5 + [1.0, 0.9, 1.0, 0.95]
    trial = trial_factory(_losses(values))
    params = {"num_steps": "4", "window": "4", "reference": "first", "diff_percent": "5"}
    params["increase_threshold_percent"] = "1000"  # the rebound check is tested below
    assert invoke_rule(LossNotDecreasing(trial, **params)).fired == []
    # Without the step that came down, the same tail fires at the first comparable point, and says why.
    stuck = trial_factory(_losses([1.0] * 4 + [1.0, 0.99, 1.0, 0.98, 1.0, 0.9, 1.0, 0.95, 1.0]))
    summary = invoke_rule(LossNotDecreasing(stuck, **params))
    assert summary.first_step == 8  # point 4's window would overlap the first one
    details = summary.fired[0].details
    assert "mean loss over 4 saved steps (GLOBAL step 8)=0.9925 is not 5% below 1 at step 3" in details
    assert "(threshold 0.95) and no earlier evaluation point was" in details


def test_loss_not_decreasing_windowed_rebound_needs_every_loss_of_the_window_up(trial_factory):
    # Batch-1 noise: one sample's loss (5.0) lifts the window's mean far over the lowest window, but the
    # other losses of the window are as low as ever: not a rebound.
    low = [0.01] * 5  # steps 4..8: the loss came down (evaluation points 0, 4, 8, 12)
    noisy = trial_factory(_losses([1.0] * 4 + low + [0.01, 5.0, 0.01, 0.01]))
    params = {"num_steps": "4", "window": "4", "increase_threshold_percent": "1000"}
    assert invoke_rule(LossNotDecreasing(noisy, reference="first", **params)).fired == []
    # A loss that went back up and stays up is one.
    diverged = trial_factory(_losses([1.0] * 4 + low + [0.5, 0.6, 0.5, 0.7]))
    summary = invoke_rule(LossNotDecreasing(diverged, reference="first", **params))
    assert summary.first_step == 12
    assert "(each of its 4 losses, lowest 0.5) is more than 1000% above the lowest loss 0.01" in (
        summary.fired[0].details
    )
    assert "(threshold 0.11)" in summary.fired[0].details


def test_loss_not_decreasing_patience_waits_for_the_plateau_to_persist(trial_factory):
    # Evaluation points 0, 2, 4, ... (buckets of 2), each compared with the point 2 steps earlier.
    # A slow start: flat for two intervals, then the loss falls. patience=1 fires at the first flat
    # point (4); patience=2 needs two failing points running, and the loss fell at 6: quiet.
    slow_start = trial_factory(_losses([1.0, 1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2]))
    assert invoke_rule(LossNotDecreasing(slow_start, num_steps="2")).first_step == 2
    assert invoke_rule(LossNotDecreasing(slow_start, num_steps="2", patience="3")).fired == []
    # A stall fires once it has failed at `patience` comparable points running, and says so.
    stall = trial_factory(_losses([1.0] * 9))
    summary = invoke_rule(LossNotDecreasing(stall, num_steps="2", patience="3"))
    assert summary.first_step == 6  # comparable points 2, 4, 6
    assert summary.fired_steps == [6, 8]
    assert ", at 3 evaluation points running" in summary.fired[0].details


def test_loss_not_decreasing_patience_with_the_first_reference(trial_factory):
    # reference=first, window 2: points 0, 4, 8, 12, 16 (buckets of 4); the first comparable point is 4.
    params = {"num_steps": "4", "window": "2", "reference": "first", "diff_percent": "5"}
    params["increase_threshold_percent"] = "1000"
    slow_start = trial_factory(_losses([1.0] * 6 + [0.7] * 7))
    assert invoke_rule(LossNotDecreasing(slow_start, **params)).first_step == 4
    assert invoke_rule(LossNotDecreasing(slow_start, patience="2", **params)).fired == []
    stall = trial_factory(_losses([1.0] * 13))
    assert invoke_rule(LossNotDecreasing(stall, patience="2", **params)).first_step == 8


def test_loss_not_decreasing_patience_does_not_delay_a_nan_loss(trial_factory):
    trial = trial_factory(_losses([10, 9, float("nan"), float("nan")]))
    assert invoke_rule(LossNotDecreasing(trial, num_steps="2", patience="3")).first_step == 2


def test_loss_not_decreasing_rejects_a_patience_below_one(trial_factory):
    trial = trial_factory(_losses([1.0, 1.0]))
    with pytest.raises(RuleParameterError, match="patience"):
        LossNotDecreasing(trial, patience="0")


def test_loss_not_decreasing_noise_sigmas_allows_for_noisy_windows(trial_factory):
    # reference=first, window 5, evaluation points every 5 steps (the first comparable one is 10).
    # Batch-1-like losses: each window's mean is within 5% of the first window's, but the losses within
    # a window swing by +-50%, so a shortfall of a few hundredths is well inside their noise: quiet with
    # noise_sigmas=1.
    params = {"num_steps": "5", "window": "5", "reference": "first", "diff_percent": "5"}
    params["increase_threshold_percent"] = "1000"
    swing = [0.5, 1.5, 1.0, 0.6, 1.4]
    noisy = trial_factory(_losses(swing * 4))
    assert invoke_rule(LossNotDecreasing(noisy, **params)).first_step == 10  # point 5's window overlaps
    assert invoke_rule(LossNotDecreasing(noisy, noise_sigmas="1", **params)).fired == []
    # A stall's losses barely move within a window: its shortfall is many standard errors wide.
    flat = trial_factory(_losses([1.0, 1.01, 0.99, 1.0, 1.005] * 4))
    summary = invoke_rule(LossNotDecreasing(flat, noise_sigmas="1", **params))
    assert summary.first_step == 10
    details = summary.fired[0].details
    assert "above the threshold, >= noise_sigmas 1 x the standard error" in details


def test_loss_not_decreasing_noise_sigmas_judges_equal_windows_by_their_means(trial_factory):
    # No noise at all (a frozen run): the standard error is 0 and the means decide, as without the gate.
    params = {"num_steps": "4", "window": "4", "reference": "first", "diff_percent": "5"}
    frozen = trial_factory(_losses([0.7] * 12))
    assert invoke_rule(LossNotDecreasing(frozen, noise_sigmas="2", **params)).first_step == 8


def test_loss_not_decreasing_rejects_a_negative_noise_sigmas(trial_factory):
    trial = trial_factory(_losses([1.0, 1.0]))
    with pytest.raises(RuleParameterError, match="noise_sigmas"):
        LossNotDecreasing(trial, noise_sigmas="-1")

"""Loss rules: LossNotDecreasing, Overfit, Overtraining (TRAIN/EVAL modes)."""

from __future__ import annotations

import numpy as np
from rules_helpers import train_mlp

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

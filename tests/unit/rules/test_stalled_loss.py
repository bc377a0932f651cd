"""StalledLoss: validation passes that stopped moving while the training loss never came down."""

from __future__ import annotations

import numpy as np
import pytest
from hook_trials import epochs

from tornasole.exceptions import RuleParameterError
from tornasole.rules import invoke_rule, rule_configs
from tornasole.rules.builtin.stalled_loss import spread_percent, whole_passes
from tornasole.rules.generic import StalledLoss


def _loss(v: float) -> dict:
    return {"loss": np.float32(v)}


def _run(path, train_means, eval_passes, batches=4):
    """Epochs of ``batches`` TRAIN steps (+-0.02 around the epoch's mean), then one validation pass each;
    ``eval_passes`` holds each pass's per-batch losses."""
    train = [[_loss(m + (0.02 if b % 2 else -0.02)) for b in range(batches)] for m in train_means]
    evals = [[_loss(v) for v in p] for p in eval_passes]
    return epochs(path, train, evals)


def test_fires_on_flat_validation_passes_when_training_never_came_down(tmp_path):
    # two validation batches per pass, 1.0 and 2.0 (another batch, another loss); the passes barely move
    passes = [[1.000, 2.000], [0.999, 1.999], [0.998, 1.998], [0.997, 1.997]]
    trial = _run(str(tmp_path / "a"), [1.1, 1.1, 1.09, 1.09], passes)
    summary = invoke_rule(StalledLoss(trial))
    first = summary.fired[0]
    # epoch e is global steps 6e..6e+3 (TRAIN) and 6e+4, 6e+5 (EVAL). Pass 3 is judged once, whole, at
    # its last step (17), against the whole passes 1 and 2 (steps 4-5, 10-11); never on its first batch
    assert first.step == 17
    assert first.mode == "EVAL"
    assert first.values["value"] == pytest.approx(0.1334, rel=1e-3)
    assert "the means of the last 3 validation passes (1.5 (steps 4..5), 1.499 (steps 10..11), 1.498" in (
        first.details
    )
    assert "2 saved step(s) each) lie within 0.1334% <= tolerance_percent 0.5%" in first.details
    assert "steps up to step 15 came 5% below the first (1.096, threshold 1.041)" in first.details


def test_quiet_on_a_converged_run_whose_validation_loss_is_flat(tmp_path):
    passes = [[0.300, 0.300]] * 4
    trial = _run(str(tmp_path / "a"), [1.1, 0.6, 0.35, 0.3], passes)
    assert invoke_rule(StalledLoss(trial)).fired == []


def test_quiet_on_a_slow_start_whose_validation_loss_moves(tmp_path):
    passes = [[0.690, 0.690], [0.700, 0.700], [0.685, 0.685], [0.695, 0.695]]  # 2.2% spread, then 2.2%
    trial = _run(str(tmp_path / "a"), [0.69] * 4, passes)
    assert invoke_rule(StalledLoss(trial)).fired == []
    # the same run is a stall for a tolerance above its spread
    assert invoke_rule(StalledLoss(trial, tolerance_percent="3")).first_step == 17


def test_needs_enough_passes_and_training_steps_and_ignores_nan(tmp_path):
    flat = [[1.0, 1.0]] * 3
    assert invoke_rule(StalledLoss(_run(str(tmp_path / "a"), [1.1] * 3, flat), num_passes="4")).fired == []
    # 2 TRAIN steps per epoch: 6 before pass 3, fewer than two windows of 5
    assert invoke_rule(StalledLoss(_run(str(tmp_path / "b"), [1.1] * 3, flat, batches=2))).fired == []
    nan = [[float("nan"), 1.0]] * 3
    assert invoke_rule(StalledLoss(_run(str(tmp_path / "c"), [1.1] * 3, nan))).fired == []


def test_spread_and_parameter_checks(trial_factory):
    assert spread_percent([1.0, 1.002, 0.998]) == pytest.approx(0.4)
    assert spread_percent([0.0, 0.0]) == 0.0
    trial = trial_factory({0: {"loss": np.float32(1)}})
    bad = (("num_passes", "1"), ("window", "0"), ("tolerance_percent", "-1"), ("diff_percent", "101"))
    for name, value in bad:
        with pytest.raises(RuleParameterError, match=name):
            StalledLoss(trial, **{name: value})
    assert rule_configs.stalled_loss(tolerance_percent=1)["DebugRuleConfiguration"]["RuleParameters"] == {
        "rule_to_invoke": "StalledLoss",
        "tolerance_percent": "1",
    }


def _run_with_weights(path, weights_per_epoch, passes):
    """Four TRAIN steps an epoch (loss 1.1 +- 0.02, ``weights/fc1.weight`` the epoch's value), then a pass."""
    train = [
        [{"loss": np.float32(1.1 + (0.02 if b % 2 else -0.02)), "weights/fc1.weight": w} for b in range(4)]
        for w in weights_per_epoch
    ]
    return epochs(path, train, [[_loss(v) for v in p] for p in passes])


def test_max_weight_change_percent_tells_a_stall_from_a_saddle(tmp_path):
    passes = [[1.000, 2.000], [0.999, 1.999], [0.998, 1.998], [0.997, 1.997]]  # flat, as in a stall
    base = np.ones((4, 4), dtype=np.float32)
    # weights that barely move (0.5% an epoch): a stall; the rule fires as it does without the parameter
    still = _run_with_weights(str(tmp_path / "still"), [base * (1 + 0.005 * e) for e in range(4)], passes)
    fired = invoke_rule(StalledLoss(still, max_weight_change_percent="5")).fired[0]
    assert fired.step == 17
    # between the last saved TRAIN step before pass 1 (step 3, 1.0) and before pass 3 (step 15, 1.01): 1%
    assert "the weights changed by 1% from step 3 to 15 <= max_weight_change_percent 5%" in fired.details
    # weights moving 30% an epoch (an optimiser on a saddle): the same flat losses are no stall
    moving = _run_with_weights(str(tmp_path / "moving"), [base * (1 + 0.3 * e) for e in range(4)], passes)
    assert invoke_rule(StalledLoss(moving, max_weight_change_percent="5")).fired == []
    assert invoke_rule(StalledLoss(moving)).first_step == 17  # unset: not checked (the rule's default)
    assert invoke_rule(StalledLoss(moving, max_weight_change_percent="70")).first_step == 17


def test_max_weight_change_percent_without_weights_judges_the_losses_and_says_so(tmp_path):
    passes = [[1.000, 2.000], [0.999, 1.999], [0.998, 1.998], [0.997, 1.997]]
    trial = _run(str(tmp_path / "a"), [1.1, 1.1, 1.09, 1.09], passes)
    fired = invoke_rule(StalledLoss(trial, max_weight_change_percent="5")).fired[0]
    assert fired.step == 17
    assert "the weights' change was not checked (none saved across the passes)" in fired.details
    with pytest.raises(RuleParameterError, match="max_weight_change_percent"):
        StalledLoss(trial, max_weight_change_percent="-1")


def test_a_pass_is_judged_whole_never_on_its_first_batches(tmp_path):
    # the first batch of every pass is flat (a net predicting one class for those samples); the second
    # batch moves 10% a pass: the whole passes are not flat, so nothing fires at any step
    passes = [[1.000, 2.000], [1.000, 1.800], [1.000, 1.600], [1.000, 1.400]]
    trial = _run(str(tmp_path / "a"), [1.1, 1.1, 1.09, 1.09], passes)
    assert invoke_rule(StalledLoss(trial)).fired == []
    # a validation pass cut short (the job stopped mid-pass) is never judged on its first batch either
    assert whole_passes([[4, 5], [10, 11], [16]]) is None
    assert whole_passes([[4, 5], [10, 11], [16, 17]]) == [[4, 5], [10, 11], [16, 17]]
    # a longer newest pass is judged at the step where it reaches the shortest earlier pass's length
    assert whole_passes([[4, 5], [10, 11, 12]]) is None
    assert whole_passes([[4, 5, 6], [10, 11]]) is None
    # passes of different lengths are compared on the shortest one's batches
    assert whole_passes([[4, 5], [8, 9, 10], [14, 15]]) == [[4, 5], [8, 9], [14, 15]]

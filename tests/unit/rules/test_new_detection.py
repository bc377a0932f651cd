"""Detection the SageMaker catalogue lacks: OscillatingLoss, the gradient-norm ratio of VanishingGradient,
the fraction-of-values criterion of SaturatedActivation; and SimilarAcrossRuns after the other run ended."""

from __future__ import annotations

import numpy as np
import pytest
from hook_trials import epochs

from tornasole.exceptions import RuleParameterError
from tornasole.rules import invoke_rule, rule_configs
from tornasole.rules.builtin.oscillating_loss import count_swings
from tornasole.rules.generic import OscillatingLoss, SaturatedActivation, SimilarAcrossRuns, VanishingGradient


def _loss(v: float) -> dict:
    return {"loss": np.float32(v)}


def _run(path, train_means, eval_means, batches=4):
    train = [[_loss(m + (0.05 if b % 2 else -0.05)) for b in range(batches)] for m in train_means]
    evals = [[_loss(m)] * 2 for m in eval_means]
    return epochs(path, train, evals)


def test_oscillating_loss_fires_on_a_validation_loss_that_swings(tmp_path):
    swinging = [1.0, 2.0, 0.9, 2.1, 0.8, 2.2, 0.9]
    trial = _run(str(tmp_path / "a"), [1.0] * 7, swinging)
    summary = invoke_rule(OscillatingLoss(trial))
    first = summary.fired[0]
    # points are the validation passes' means; by pass 5 (EVAL steps 8, 9 -> global 28, 29) there are
    # swings at passes 2 and 4: 2 >= max(min_swings 2, 0.2 x 5)
    assert first.mode == "EVAL"
    assert first.step == 28
    assert first.values["value"] == 2
    assert "loss (EVAL): 2 swings of >= 10% of the range 1.3 in 5 phase means" in first.details
    assert "0.9 -> 2.1 -> 0.8 (steps 22..23)" in first.details


def test_oscillating_loss_quiet_on_a_noisy_but_falling_loss(tmp_path):
    falling = [1.0, 0.8, 0.82, 0.6, 0.5, 0.52, 0.4, 0.35]  # small bumps are not swings
    trial = _run(str(tmp_path / "a"), [1.2] * 8, falling)
    assert invoke_rule(OscillatingLoss(trial)).fired == []
    # the TRAIN batches alternate +-0.05 around a flat mean: judged as phase means they do not swing
    assert invoke_rule(OscillatingLoss(trial, mode="TRAIN")).fired == []


def test_oscillating_loss_groups_steps_when_the_trial_has_no_phases(tmp_path):
    values = []
    for g in range(6):
        values += [1.0 if g % 2 == 0 else 3.0] * 4
    trial = epochs(str(tmp_path / "a"), [[_loss(v) for v in values]])
    summary = invoke_rule(OscillatingLoss(trial, group_steps="4"))
    # groups of 4 TRAIN steps: means 1, 3, 1, 3, 1 -> swings at groups 1 and 3 once group 4 has begun
    assert summary.first_step == 16


def test_count_swings_and_parameter_checks(trial_factory):
    assert count_swings([1.0, 2.0, 1.0], 10) == [1]
    # relative to the range, a flat series' jitter is a swing; relative to its value it is not
    assert count_swings([1.0, 1.05, 1.0], 10) == [1]
    assert count_swings([1.0, 1.05, 1.0], 10, min_swing_percent=10) == []
    # a late bump near 0 is small next to the initial descent
    assert count_swings([1.0, 0.1, 0.0004, 0.0009, 0.0003], 10) == []
    trial = trial_factory({0: {"loss": np.float32(1)}})
    with pytest.raises(RuleParameterError, match="min_points"):
        OscillatingLoss(trial, min_points="2")
    assert rule_configs.oscillating_loss(swing_percent=20)["DebugRuleConfiguration"]["RuleParameters"] == {
        "rule_to_invoke": "OscillatingLoss",
        "swing_percent": "20",
    }


def _grads(first_scale: float) -> dict:
    rng = np.random.default_rng(1)
    return {
        "gradients/layers.0.weight": rng.normal(size=(5, 2)) * first_scale,
        "gradients/layers.0.bias": rng.normal(size=5) * first_scale,
        "gradients/layers.2.weight": rng.normal(size=(5, 5)) * 1e-3,
        "gradients/layers.10.weight": rng.normal(size=(1, 5)) * 1e-2,
    }


def test_vanishing_gradient_norm_ratio_catches_what_the_mean_misses(tmp_path):
    trial = epochs(str(tmp_path / "a"), [[_grads(1e-6)]])
    # mean |g| of the first layer is ~1e-6: above SageMaker's 1e-7, so the default rule is quiet
    assert invoke_rule(VanishingGradient(trial)).fired == []
    summary = invoke_rule(VanishingGradient(trial, norm_ratio_threshold="0.001"))
    outcome = summary.fired[0]
    # layers.0 is first and layers.10 last in natural order (biases left out)
    assert outcome.values["tensor"] == "gradients/layers.0.weight"
    assert "||gradients/layers.0.weight|| / ||gradients/layers.10.weight||" in outcome.details
    assert outcome.values["value"] < 0.001
    assert outcome.values["threshold"] == 0.001
    healthy = epochs(str(tmp_path / "b"), [[_grads(1e-2)]])
    assert invoke_rule(VanishingGradient(healthy, norm_ratio_threshold="0.001")).fired == []


def test_vanishing_gradient_layer_regexes_pick_the_ends(tmp_path):
    trial = epochs(str(tmp_path / "a"), [[_grads(1e-6)]])
    rule = VanishingGradient(
        trial,
        norm_ratio_threshold="0.001",
        first_layer_regex=".*layers.2.weight",
        last_layer_regex=".*layers.10.weight",
    )
    # layers.2 / layers.10 is ~0.1 > 0.001: quiet
    assert invoke_rule(rule).fired == []


def test_vanishing_gradient_skip_all_zero_leaves_dead_layers_to_the_dead_unit_rules(tmp_path):
    dead = {"gradients/fc1.bias": np.zeros(4), "gradients/fc1.weight": np.full(8, 0.1)}
    trial = epochs(str(tmp_path / "a"), [[dead]])
    # a bias gradient that is 0 everywhere (every unit of the layer dead on the batch) has mean 0 < 1e-7
    assert invoke_rule(VanishingGradient(trial)).fired[0].values["tensor"] == "gradients/fc1.bias"
    assert invoke_rule(VanishingGradient(trial, skip_all_zero="True")).fired == []
    # a tensor that is not all 0 is judged as before, zeros counted in its mean
    tiny = {"gradients/fc1.bias": np.array([0.0, 0.0, 0.0, 1e-8])}
    trial = epochs(str(tmp_path / "b"), [[tiny]])
    assert invoke_rule(VanishingGradient(trial, skip_all_zero="True")).fired[0].values["value"] < 1e-8


def test_saturated_activation_fraction_of_values(tmp_path):
    rng = np.random.default_rng(0)
    # 60% of the values beyond +-5 but every unit is inside the bounds for some samples
    x = rng.uniform(-3, 3, size=(10, 8))
    x[:6] = 8.0 * np.sign(rng.normal(size=(6, 8)))
    trial = epochs(str(tmp_path / "a"), [[{"fc1_tanh_input": x}]])
    assert invoke_rule(SaturatedActivation(trial)).fired == []  # SageMaker's per-unit reading
    bounds = {"threshold_tanh_min": "-5", "threshold_tanh_max": "5"}
    summary = invoke_rule(SaturatedActivation(trial, fraction_saturated="50", **bounds))
    assert "60% of the 80 values of fc1_tanh_input lie outside (-5, 5) (> fraction_saturated 50%)" in (
        summary.fired[0].details
    )
    assert invoke_rule(SaturatedActivation(trial, fraction_saturated="70", **bounds)).fired == []


def test_similar_across_runs_keeps_its_verdict_after_the_other_run_ended(tmp_path):
    base = epochs(str(tmp_path / "a"), [[{"weights/w": np.full(2, float(s))} for s in range(6)]])
    other = epochs(str(tmp_path / "b"), [[{"weights/w": np.full(2, float(s) + (s == 2))} for s in range(3)]])
    summary = invoke_rule(SimilarAcrossRuns(base, other_trials=[other]))
    # differs at step 2; steps 3..5 exist only in the base run: no error, the firing stands
    assert summary.fired_steps == [2]
    assert "weights/w at step 2 differs from trial" in summary.fired[0].details
    rule = SimilarAcrossRuns(base, other_trials=[other])
    assert rule.evaluate(5).status == "NoIssuesFound"


def test_oscillating_loss_ignores_the_jitter_of_a_flat_loss(tmp_path):
    flat = [0.836, 0.818, 0.808, 0.815, 0.811, 0.807, 0.82, 0.816]
    trial = _run(str(tmp_path / "a"), [0.8] * 8, flat)
    assert invoke_rule(OscillatingLoss(trial)).fired == []
    assert invoke_rule(OscillatingLoss(trial, min_swing_percent="0")).fired != []


def _converging(path, losses, grad):
    """TRAIN steps with a loss per step and every layer's gradient at ``grad`` (tiny: a layer 'vanished')."""
    train = [[{"loss": np.float32(v), **_grads(grad)} for v in losses]]
    return epochs(path, train)


def test_vanishing_gradient_loss_gate_tells_a_converged_run_from_a_vanishing_one(tmp_path):
    # gradients of 1e-9 everywhere: under the mean threshold at every step
    converged = _converging(str(tmp_path / "c"), [2.0, 1.8, 1.5, 1.0, 0.5, 0.2, 0.1, 0.05, 0.04], 1e-9)
    stuck = _converging(str(tmp_path / "s"), [0.7, 0.69, 0.7, 0.69, 0.7, 0.69, 0.7, 0.69, 0.7], 1e-9)
    # unset (the default): both fire at step 0, as SageMaker's rule does
    assert invoke_rule(VanishingGradient(converged)).first_step == 0
    rule = dict(loss_drop_percent="80", loss_window="3")
    summary = invoke_rule(VanishingGradient(stuck, **rule))
    # judged from loss_window + 1 saved losses: steps 0-2 cannot tell a converged run, so they fire and say so
    assert summary.first_step == 0
    assert "too few saved steps to tell a converged run" in summary.fired[0].details
    later = [o for o in summary.fired if o.step == 8][0]
    assert "loss (TRAIN) came down 0% from its start (0.6967 -> 0.6967)" in later.details
    assert "< loss_drop_percent 80%" in later.details
    # the converged run: from step 5 on the last 3 losses (1.0, 0.5, 0.2 -> 0.5667) are 70% below the first
    # 3 (1.767); from step 6 on (0.5667 -> 0.2667) 85%: quiet from there
    fired = [o.step for o in invoke_rule(VanishingGradient(converged, **rule)).fired]
    assert fired == [0, 1, 2, 3, 4, 5]
    # no training loss saved: the gradients are judged alone, and the report says so
    alone = epochs(str(tmp_path / "a"), [[_grads(1e-9)] * 4])
    outcome = invoke_rule(VanishingGradient(alone, **rule)).fired[0]
    assert "no training loss saved: judged on the gradients alone" in outcome.details
    # a NaN loss is no converged run
    nan = _converging(str(tmp_path / "n"), [2.0, 1.0, 0.5, float("nan"), 0.01, 0.01, 0.01], 1e-9)
    assert 5 in [o.step for o in invoke_rule(VanishingGradient(nan, **rule)).fired]


def test_vanishing_gradient_loss_gate_parameters_and_window(tmp_path):
    trial = _converging(str(tmp_path / "c"), [1.0] * 4, 1e-9)
    for bad in ({"loss_drop_percent": "0"}, {"loss_drop_percent": "101"}, {"loss_window": "0"}):
        with pytest.raises(RuleParameterError, match=next(iter(bad))):
            VanishingGradient(trial, **bad)
    rule = VanishingGradient(trial, loss_drop_percent="80", loss_window="3")
    # the serverless evaluator loads the first and the last few saved steps, not the whole run
    assert (rule.history_steps(), rule.leading_steps()) == (12, 12)
    assert (VanishingGradient(trial).history_steps(), VanishingGradient(trial).leading_steps()) == (0, 0)

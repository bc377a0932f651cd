"""ValidationLossNotDecreasing: the training loss comes down while no validation pass beats the first."""

from __future__ import annotations

import numpy as np
import pytest
from hook_trials import epochs

from tornasole.exceptions import RuleParameterError
from tornasole.rules import create_rule, invoke_rule, recommended_rules, rule_configs
from tornasole.rules.builtin.validation_loss_not_decreasing import improvement_percent
from tornasole.rules.generic import ValidationLossNotDecreasing


def _loss(v: float) -> dict:
    return {"loss": np.float32(v)}


def _run(path, train_means, eval_passes, batches=4):
    """Epochs of ``batches`` TRAIN steps (+-0.02 around the epoch's mean), then one validation pass each;
    ``eval_passes`` holds each pass's per-batch losses."""
    train = [[_loss(m + (0.02 if b % 2 else -0.02)) for b in range(batches)] for m in train_means]
    evals = [[_loss(v) for v in p] for p in eval_passes]
    return epochs(path, train, evals)


# what the model-family benchmark's permuted-label runs look like (the transformer's, seed 0): the model
# memorises (training loss 1.79 -> 1.60) while the validation loss only rises from its first pass
MEMORISING_TRAIN = [1.79, 1.73, 1.70, 1.68, 1.60]
MEMORISING_VAL = [[1.76, 1.77], [1.78, 1.79], [1.81, 1.82], [1.84, 1.85], [1.83, 1.84]]


def test_fires_when_the_training_loss_falls_and_no_pass_beats_the_first(tmp_path):
    trial = _run(str(tmp_path / "a"), MEMORISING_TRAIN, MEMORISING_VAL)
    summary = invoke_rule(ValidationLossNotDecreasing(trial))
    first = summary.fired[0]
    # epoch e is global steps 6e..6e+3 (TRAIN) and 6e+4, 6e+5 (EVAL): the 5th pass is judged once, whole,
    # at its last step (29)
    assert first.step == 29
    assert first.mode == "EVAL"
    assert first.values["value"] == pytest.approx(-1.1331, rel=1e-3)  # the best later pass is 1.1% above
    assert first.values["train_drop_percent"] == pytest.approx(10.6145, rel=1e-3)
    assert "in 5 validation passes" in first.details
    assert "none after the first (1.765) came min_improvement_percent 2% below it" in first.details
    assert "came 10.61% below its first phase (1.79 -> 1.6)" in first.details


def test_quiet_on_a_run_that_generalises_then_overfits(tmp_path):
    # the validation loss falls by a third, then rises for three passes while training goes on falling:
    # Overfit's pattern, never this rule's (the best pass stays the one after the first)
    val = [[1.0, 1.0], [0.66, 0.66], [0.70, 0.70], [0.75, 0.75], [0.80, 0.80], [0.90, 0.90]]
    trial = _run(str(tmp_path / "a"), [1.2, 0.8, 0.5, 0.3, 0.2, 0.1], val)
    assert invoke_rule(ValidationLossNotDecreasing(trial)).fired == []


def test_quiet_when_the_training_loss_does_not_move_either(tmp_path):
    # a learning rate far too small: nothing moves (LossNotDecreasing's and StalledLoss's to report)
    trial = _run(str(tmp_path / "a"), [1.0, 1.0, 0.999, 0.998, 0.998], [[1.0, 1.0]] * 5)
    assert invoke_rule(ValidationLossNotDecreasing(trial)).fired == []
    # with the training-loss condition off the same run is flagged
    rule = ValidationLossNotDecreasing(trial, min_train_drop_percent="0")
    assert invoke_rule(rule).first_step == 29


def test_a_slow_but_real_improvement_is_not_flagged(tmp_path):
    # a slow starter leaving its saddle: 3% better than the first pass by the 5th, above
    # min_improvement_percent 2
    val = [[1.00, 1.00], [0.995, 0.995], [1.0, 1.0], [0.985, 0.985], [0.97, 0.97]]
    trial = _run(str(tmp_path / "a"), [1.1, 1.0, 0.95, 0.9, 0.88], val)
    assert invoke_rule(ValidationLossNotDecreasing(trial)).fired == []
    assert invoke_rule(ValidationLossNotDecreasing(trial, min_improvement_percent="5")).first_step == 29


def test_needs_min_passes_and_ignores_non_finite_losses(tmp_path):
    four = _run(str(tmp_path / "a"), MEMORISING_TRAIN[:4], MEMORISING_VAL[:4])
    assert invoke_rule(ValidationLossNotDecreasing(four)).fired == []
    assert invoke_rule(ValidationLossNotDecreasing(four, min_passes="4")).first_step == 23
    nan = [[float("nan"), 1.0]] + MEMORISING_VAL[1:]
    assert (
        invoke_rule(ValidationLossNotDecreasing(_run(str(tmp_path / "b"), MEMORISING_TRAIN, nan))).fired == []
    )


def test_improvement_and_parameter_checks(trial_factory):
    assert improvement_percent(2.0, [1.9, 1.95]) == pytest.approx(5.0)
    assert improvement_percent(1.0, [1.1]) == pytest.approx(-10.0)
    assert improvement_percent(0.0, [0.0]) == 0.0
    trial = trial_factory({0: {"loss": np.float32(1)}})
    for name, value in (
        ("min_passes", "1"),
        ("min_improvement_percent", "-1"),
        ("min_train_drop_percent", "-2"),
    ):
        with pytest.raises(RuleParameterError, match=name):
            ValidationLossNotDecreasing(trial, **{name: value})
    config = rule_configs.validation_loss_not_decreasing(min_passes=5)["DebugRuleConfiguration"]
    assert config["RuleParameters"] == {"rule_to_invoke": "ValidationLossNotDecreasing", "min_passes": "5"}


def test_the_recommended_set_runs_it_with_string_parameters(tmp_path):
    (conf,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == "ValidationLossNotDecreasing"]
    params = {k: v for k, v in conf["RuleParameters"].items() if k != "rule_to_invoke"}
    assert params == {
        "min_passes": "4",
        "min_improvement_percent": "2",
        "min_train_drop_percent": "1",
        "first_pass_below_start_percent": "30",
        "learning_z": "2",
        "learning_growth": "2",
        "learning_span": "3",
    }
    trial = _run(str(tmp_path / "a"), MEMORISING_TRAIN, MEMORISING_VAL)
    # four passes: judged at the fourth pass's last step (23), one epoch sooner than the rule's default
    assert invoke_rule(create_rule("ValidationLossNotDecreasing", trial, **params)).first_step == 23


def test_a_run_without_a_validation_pass_is_told_what_to_save():
    from tornasole.rules.inputs import rule_needs

    needs = rule_needs("ValidationLossNotDecreasing", {})
    assert needs.reads == "losses in both TRAIN and EVAL mode (a validation pass)"
    assert "hook.set_mode(modes.EVAL)" in needs.how

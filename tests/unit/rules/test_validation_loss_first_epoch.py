"""ValidationLossNotDecreasing's ``first_pass_below_start_percent``: a model that converged within its first
epoch (its first validation pass far below the untrained model's loss, then only noise) is not one that
never generalised (its first pass near the loss it started at). Traces written with the numpy hook."""

from __future__ import annotations

import numpy as np
import pytest
from hook_trials import epochs

from tornasole.exceptions import RuleParameterError
from tornasole.rules import create_rule, invoke_rule, recommended_rules
from tornasole.rules.generic import ValidationLossNotDecreasing


def _trial(path, train: list[list[float]], passes: list[list[float]]):
    return epochs(
        path,
        [[{"loss": np.float32(v)} for v in epoch] for epoch in train],
        [[{"loss": np.float32(v)} for v in p] for p in passes],
    )


# the Keras regression of the families benchmark (healthy, seed 0): the untrained model's loss 0.83, the
# first pass 0.558 (33% below it), then 0.647, 1.108, 0.577, 0.655 while the training loss goes on down
CONVERGED_TRAIN = [[0.83, 0.74, 0.77, 0.78], [0.62, 0.60], [0.64, 0.63], [0.65, 0.63], [0.49, 0.47]]
CONVERGED_VAL = [[0.558], [0.647], [1.108], [0.577], [0.655]]
# permuted labels (the transformer's, seed 0): the first pass 1.765 is 1.4% below the first loss, 1.79
MEMORISING_TRAIN = [[1.79, 1.77, 1.81, 1.79], [1.73, 1.73], [1.70, 1.70], [1.68, 1.68], [1.60, 1.60]]
MEMORISING_VAL = [[1.76, 1.77], [1.78, 1.79], [1.81, 1.82], [1.84, 1.85], [1.83, 1.84]]


def test_quiet_on_a_model_that_converged_in_its_first_epoch(tmp_path):
    trial = _trial(str(tmp_path / "a"), CONVERGED_TRAIN, CONVERGED_VAL)
    assert invoke_rule(ValidationLossNotDecreasing(trial)).fired  # without the check: the known blind side
    rule = ValidationLossNotDecreasing(trial, first_pass_below_start_percent="30")
    assert invoke_rule(rule).fired == []
    assert rule.leading_steps() == 1  # the serverless evaluator loads the run's first step for it


def test_still_fires_on_a_model_that_never_generalised(tmp_path):
    trial = _trial(str(tmp_path / "a"), MEMORISING_TRAIN, MEMORISING_VAL)
    fired = invoke_rule(ValidationLossNotDecreasing(trial, first_pass_below_start_percent="30")).fired
    assert fired
    assert fired[0].mode == "EVAL"
    # a first pass 33% below the start is quiet at 30, judged at 40
    trial = _trial(str(tmp_path / "b"), CONVERGED_TRAIN, CONVERGED_VAL)
    assert invoke_rule(ValidationLossNotDecreasing(trial, first_pass_below_start_percent="40")).fired


def test_a_start_that_is_not_positive_is_not_judged(tmp_path):
    # a loss at or below 0 (a continuous distribution's negative log-likelihood): no % below it to read
    train = [[0.0, *CONVERGED_TRAIN[0][1:]], *CONVERGED_TRAIN[1:]]
    trial = _trial(str(tmp_path / "a"), train, CONVERGED_VAL)
    assert invoke_rule(ValidationLossNotDecreasing(trial, first_pass_below_start_percent="30")).fired


@pytest.mark.parametrize("value", ["0", "100", "-5"])
def test_the_percentage_is_checked(trial_factory, value):
    trial = trial_factory({0: {"loss": np.float32(1.0)}})
    with pytest.raises(RuleParameterError, match="first_pass_below_start_percent"):
        ValidationLossNotDecreasing(trial, first_pass_below_start_percent=value)
    assert ValidationLossNotDecreasing(trial).leading_steps() == 0


def test_the_recommended_set_checks_the_first_pass_against_the_start(tmp_path):
    (conf,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == "ValidationLossNotDecreasing"]
    params = {k: v for k, v in conf["RuleParameters"].items() if k != "rule_to_invoke"}
    assert params["first_pass_below_start_percent"] == "30"
    converged = _trial(str(tmp_path / "a"), CONVERGED_TRAIN, CONVERGED_VAL)
    assert invoke_rule(create_rule("ValidationLossNotDecreasing", converged, **params)).fired == []
    memorising = _trial(str(tmp_path / "b"), MEMORISING_TRAIN, MEMORISING_VAL)
    assert invoke_rule(create_rule("ValidationLossNotDecreasing", memorising, **params)).fired

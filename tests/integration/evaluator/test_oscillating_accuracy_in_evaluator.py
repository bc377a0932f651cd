"""OscillatingAccuracy with the recommended ``noise_z`` in the serverless evaluator on moto (issue 29): the
epoch accuracy of a healthy net on 138 training samples, whose swings are its sampling noise, stays quiet
after judging; an oscillation on 700 samples, beyond that noise, fires at the step ``invoke_rule`` names
over the whole trial (the sample count is read from the values the evaluator loads, epoch by epoch)."""

from __future__ import annotations

import numpy as np
import pytest
from evaluator_stack import Stack
from rule_runs import assert_all_quiet, assert_each_fires_as_offline, run_in_evaluator

from tornasole.modes import ModeKeys
from tornasole.rules.builtin.recommended import recommended_rules

# moto as the local mode runs it: the rule runs are long, and their claim is the verdicts (conftest)
pytestmark = pytest.mark.usefixtures("moto_as_local_mode")

RULES = [c for c in recommended_rules() if c["RuleConfigurationName"] == "OscillatingAccuracy"]
COLLECTIONS = {
    "metrics": {"name": "metrics", "include_regex": ["^epoch_accuracy$"]},
    "losses": {"name": "losses", "include_regex": ["^loss$"]},
}
#: a healthy net's first 15 epochs on wine's 138 samples (bench/detection, wine ``noisy_small_batch`` s0)
WINE = [c / 138 for c in (42, 38, 69, 102, 111, 117, 115, 111, 116, 121, 116, 117, 120, 124, 113)]
#: a PyTorch re-make of AUTOTRAINER's ``Oscillating_Loss_Case`` on its 700 training blobs
DEMO = [k / 700 for k in (485, 504, 399, 410, 423, 426, 377, 373, 345, 334, 427, 417, 447, 378, 399)]


def _mode_of(step: int) -> ModeKeys:
    return ModeKeys.EVAL if step % 2 else ModeKeys.TRAIN


def _run(stack: Stack, accs: list[float]) -> dict[str, tuple[str, str]]:
    """Epochs of one saved TRAIN step (the epoch's last, with ``epoch_accuracy``) and one validation step:
    the whole run within the evaluator's window of saved steps, which a rule over every epoch reads."""

    def tensors(step: int) -> dict[str, np.ndarray]:
        out = {"loss": np.array([0.7], np.float32)}
        if _mode_of(step) == ModeKeys.TRAIN:
            out["epoch_accuracy"] = np.array([accs[step // 2]], np.float32)
        return out

    return run_in_evaluator(stack, RULES, 2 * len(accs), tensors, collections=COLLECTIONS, mode_of=_mode_of)


def test_small_training_set_noise_is_quiet_in_the_evaluator(stack: Stack) -> None:
    got = _run(stack, WINE)
    assert_all_quiet(got, RULES)
    assert not got["OscillatingAccuracy"][1].startswith("NothingEvaluated"), got


def test_an_oscillation_beyond_the_noise_fires_in_the_evaluator_as_offline(stack: Stack) -> None:
    got = _run(stack, DEMO)
    assert_each_fires_as_offline(got, RULES, {"OscillatingAccuracy": 28})
    assert "over 700 samples" in got["OscillatingAccuracy"][1]

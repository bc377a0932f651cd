"""SlowConvergence: AUTOTRAINER's slow-convergence criterion on validation passes of a saved accuracy."""

from __future__ import annotations

import numpy as np
import pytest
from hook_trials import epochs

from tornasole.exceptions import RuleParameterError
from tornasole.rules import invoke_rule, rule_configs
from tornasole.rules.builtin.slow_convergence import max_rise
from tornasole.rules.generic import SlowConvergence


def _run(path, passes, losses=None, batches=4, acc_name="accuracy"):
    """Epochs of ``batches`` TRAIN steps (accuracy and loss), then one validation pass each; ``passes``
    holds each pass's per-batch accuracies, ``losses`` (optional) each pass's per-batch losses."""
    step = [
        {"loss": np.float32(0.7), acc_name: np.float32(0.5 + (0.1 if b % 2 else -0.1))}
        for b in range(batches)
    ]
    train = [step for _ in passes]
    evals = []
    for e, p in enumerate(passes):
        steps = []
        for b, a in enumerate(p):
            tensors = {acc_name: np.float32(a)}
            if losses is not None:
                tensors["loss"] = np.float32(losses[e][b])
            steps.append(tensors)
        evals.append(steps)
    return epochs(path, train, evals)


def test_fires_when_the_validation_accuracy_never_rose_and_stays_low(tmp_path):
    # epoch e is global steps 6e..6e+3 (TRAIN) and 6e+4, 6e+5 (EVAL); passes of two batches, 0.50 and 0.54
    trial = _run(str(tmp_path / "a"), [[0.50, 0.54], [0.50, 0.545], [0.50, 0.54], [0.51, 0.55]])
    summary = invoke_rule(SlowConvergence(trial))
    first = summary.fired[0]
    assert first.step == 17  # the third pass, judged whole at its last step
    assert first.mode == "EVAL"
    assert first.values["value"] == pytest.approx(0.0025, abs=1e-6)
    assert first.values["best"] == pytest.approx(0.5225, abs=1e-6)
    shown = "in 3 validation passes (means of 2 saved step(s) each, last: 0.52, 0.5225, 0.52)"
    assert f"accuracy (EVAL): {shown}" in first.details
    assert "the largest rise from one pass to the next is 0.0025 < min_gain 0.01" in first.details
    assert "the best is 0.5225 < max_accuracy 0.6: the model is not learning" in first.details


def test_quiet_when_the_accuracy_rose_once_or_is_high(tmp_path):
    rising = _run(str(tmp_path / "rising"), [[0.50, 0.50], [0.52, 0.52], [0.52, 0.52], [0.52, 0.52]])
    assert invoke_rule(SlowConvergence(rising)).fired == []
    # a rise of 0.02 is under min_gain 0.03: the same run is slow for a stricter gain
    assert invoke_rule(SlowConvergence(rising, min_gain="0.03")).first_step == 17
    converged = _run(str(tmp_path / "high"), [[0.90, 0.90]] * 4)
    assert invoke_rule(SlowConvergence(converged)).fired == []
    assert invoke_rule(SlowConvergence(converged, max_accuracy="0.95")).first_step == 17
    # a run that learned early is never flagged later: the rise counts since the first pass
    learned = _run(str(tmp_path / "learned"), [[0.30, 0.30], [0.50, 0.50]] + [[0.50, 0.50]] * 4)
    assert invoke_rule(SlowConvergence(learned)).fired == []


def test_needs_min_passes_and_judges_whole_passes_only(tmp_path):
    two = _run(str(tmp_path / "two"), [[0.5, 0.5], [0.5, 0.5]])
    assert invoke_rule(SlowConvergence(two)).fired == []
    assert invoke_rule(SlowConvergence(two, min_passes="2")).first_step == 11
    # every pass's first batch is flat (a model predicting one class for those samples) while the second
    # batch climbs 0.05 a pass: the whole passes rise 0.025 a pass, so no step fires
    climbing = _run(str(tmp_path / "climb"), [[0.5, 0.40], [0.5, 0.45], [0.5, 0.50], [0.5, 0.55]])
    assert invoke_rule(SlowConvergence(climbing)).fired == []


def test_loss_tolerance_tells_a_stall_from_a_net_that_is_finding_its_way(tmp_path):
    flat_acc = [[0.5, 0.5]] * 4
    moving = [[0.70, 0.70], [0.68, 0.68], [0.66, 0.66], [0.64, 0.64]]  # 6% spread over three passes
    still = [[0.70, 0.70], [0.699, 0.699], [0.698, 0.698], [0.697, 0.697]]
    finding = _run(str(tmp_path / "finding"), flat_acc, moving)
    assert invoke_rule(SlowConvergence(finding, loss_tolerance_percent="3")).fired == []
    assert invoke_rule(SlowConvergence(finding)).first_step == 17  # unset: not checked (the default)
    stalled = _run(str(tmp_path / "stalled"), flat_acc, still)
    fired = invoke_rule(SlowConvergence(stalled, loss_tolerance_percent="3")).fired[0]
    assert fired.step == 17
    note = "the validation loss barely moved (loss within 0.2861% <= loss_tolerance_percent 3%)"
    assert note in fired.details
    # a NaN validation loss never passes the loss check (ExplodingTensor's to report)
    nan = _run(str(tmp_path / "nan"), flat_acc, [[float("nan")] * 2] * 4)
    assert invoke_rule(SlowConvergence(nan, loss_tolerance_percent="3")).fired == []
    # no loss saved in EVAL mode: the accuracy is judged alone, and the report says so
    alone = _run(str(tmp_path / "alone"), flat_acc)
    fired = invoke_rule(SlowConvergence(alone, loss_tolerance_percent="3")).fired[0]
    assert "no validation loss saved at those steps: judged on the accuracy alone" in fired.details


def test_a_run_without_validation_accuracy_is_skipped_never_judged_healthy(tmp_path):
    loss = {"loss": np.float32(0.7)}
    trial = epochs(str(tmp_path / "a"), [[loss] * 4] * 3, [[loss]] * 3)
    summary = invoke_rule(SlowConvergence(trial))
    assert summary.fired == []
    assert summary.steps_evaluated == 0
    assert summary.steps_skipped == 15
    # another accuracy name is found by tensor_regex (re.match, as the other rules' tensor_regex)
    named = _run(str(tmp_path / "b"), [[0.5, 0.5]] * 3, acc_name="val/top1")
    assert invoke_rule(SlowConvergence(named)).steps_evaluated == 0
    assert invoke_rule(SlowConvergence(named, tensor_regex="val/top1")).first_step == 17
    short = _run(str(tmp_path / "c"), [[0.5, 0.5]] * 3, acc_name="acc")
    assert invoke_rule(SlowConvergence(short)).first_step == 17


def test_parameters_are_checked_and_the_config_builder_exists():
    for bad in ({"min_passes": "1"}, {"min_gain": "-0.1"}, {"loss_tolerance_percent": "-1"}):
        with pytest.raises(RuleParameterError, match=next(iter(bad))):
            SlowConvergence(None, **bad)
    config = rule_configs.slow_convergence(loss_tolerance_percent=3)
    assert config["DebugRuleConfiguration"]["RuleParameters"] == {
        "rule_to_invoke": "SlowConvergence",
        "loss_tolerance_percent": "3",
    }
    assert max_rise([0.5, 0.52, 0.51, 0.515]) == 0.02

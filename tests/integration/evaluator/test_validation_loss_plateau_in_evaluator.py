"""ValidationLossNotDecreasing with the recommended set's ``learning_z`` in the serverless evaluator on moto:
a classifier leaving a plateau at chance (its mean validation loss flat for four passes while its
predictions learn about their own labels, more than doubling a pass) is quiet as the steps arrive one
notification at a time, as ``invoke_rule`` is over the whole trial; its shuffled twin fires at the fourth
pass, at the step ``invoke_rule`` names. The test reads the pass before the newest one, which the evaluator
loads as history (the rule reads every pass since the start)."""

from __future__ import annotations

import numpy as np
import pytest
from evaluator_stack import TRIAL, Stack
from rule_runs import run_in_evaluator

from tornasole.modes import ModeKeys
from tornasole.rules import create_rule, invoke_rule, recommended_rules
from tornasole.trials import create_trial

# moto as the local mode runs it: the rule runs are long, and their claim is the verdicts (conftest)
pytestmark = pytest.mark.usefixtures("moto_as_local_mode")

(RULE,) = [r for r in recommended_rules() if r["RuleConfigurationName"] == "ValidationLossNotDecreasing"]
PARAMS = {k: v for k, v in RULE["RuleParameters"].items() if k != "rule_to_invoke"}
COLLECTIONS = {
    "losses": {"name": "losses", "include_regex": ["[Ll]oss_(?!input).*output"]},
    "loss_inputs": {"name": "loss_inputs", "include_regex": ["[Ll]oss_input_[01]$"]},
}
TRAIN_STEPS, EVAL_STEPS, BATCH = 2, 2, 128
#: ``(confidence, strength)`` of each validation pass's logits: the unit test's plateau being left
#: (tests/unit/rules/test_validation_loss_plateau.py), whose premise that test asserts.
PASSES = [(1.0, 0.0), (1.0, 0.0), (1.451, 0.1), (1.941, 0.25), (1.0, 0.9), (1.0, 1.5)]


def _run(stack: Stack, labels_seen: str) -> dict[str, tuple[str, str]]:
    labels = np.arange(EVAL_STEPS * BATCH) % 4
    seen = labels if labels_seen == "own" else np.random.default_rng(1).permutation(labels)
    noise = np.random.default_rng(0).normal(0.0, 0.5, (len(labels), 4))
    per_epoch = TRAIN_STEPS + EVAL_STEPS

    def mode_of(step: int) -> ModeKeys:
        return ModeKeys.TRAIN if step % per_epoch < TRAIN_STEPS else ModeKeys.EVAL

    def tensors(step: int) -> dict[str, np.ndarray]:
        epoch, at = divmod(step, per_epoch)
        if mode_of(step) == ModeKeys.TRAIN:
            return {"CrossEntropyLoss_output_0": np.float32(1.4 * 0.98**epoch)}  # memorising
        confidence, strength = PASSES[epoch]
        rows = slice((at - TRAIN_STEPS) * BATCH, (at - TRAIN_STEPS + 1) * BATCH)
        logits = (confidence * noise + strength * np.eye(4)[seen])[rows]
        log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        return {
            "CrossEntropyLoss_output_0": np.float32(-log_p[np.arange(BATCH), labels[rows]].mean()),
            "CrossEntropyLoss_input_0": logits.astype(np.float32),
            "CrossEntropyLoss_input_1": labels[rows],
        }

    steps = len(PASSES) * per_epoch
    return run_in_evaluator(stack, [RULE], steps, tensors, collections=COLLECTIONS, mode_of=mode_of)


def _offline(**params: str):
    return invoke_rule(create_rule("ValidationLossNotDecreasing", create_trial(TRIAL), **params))


def test_a_plateau_being_left_is_quiet_in_the_evaluator_as_offline(stack: Stack) -> None:
    status, details = _run(stack, "own")["ValidationLossNotDecreasing"]
    assert status == "NoIssuesFound", details
    assert not details.startswith("NothingEvaluated"), details
    assert not _offline(**PARAMS).fired
    without = {k: v for k, v in PARAMS.items() if k != "learning_z"}
    assert _offline(**without).first_step == 4 * (TRAIN_STEPS + EVAL_STEPS) - 1  # the 4th pass's end


def test_its_shuffled_twin_fires_in_the_evaluator_as_offline(stack: Stack) -> None:
    status, details = _run(stack, "other")["ValidationLossNotDecreasing"]
    assert status == "IssuesFound", details
    offline = _offline(**PARAMS)
    assert offline.first_step == 4 * (TRAIN_STEPS + EVAL_STEPS) - 1
    assert f"step {offline.first_step} " in details

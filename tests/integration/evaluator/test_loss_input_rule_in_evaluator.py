"""SoftmaxBeforeCrossEntropy in the serverless evaluator on moto: it fires as the steps arrive one
notification at a time (loading only the history it says it reads), at the step ``invoke_rule`` names over
the whole trial, and stays quiet on the healthy twin (logits into the loss)."""

from __future__ import annotations

import numpy as np
from evaluator_stack import TRIAL, Stack
from rule_runs import run_in_evaluator

from tornasole.rules import create_rule, invoke_rule
from tornasole.trials import create_trial

STEPS = 8
RULE = {"RuleConfigurationName": "SoftmaxBeforeCrossEntropy", "RuleParameters": {}}
COLLECTIONS = {
    "losses": {"name": "losses", "include_regex": ["[Ll]oss_(?!input).*output"]},
    "loss_inputs": {"name": "loss_inputs", "include_regex": ["[Ll]oss_input_0$"]},
}


def _run(stack: Stack, softmax: bool) -> dict[str, tuple[str, str]]:
    rng = np.random.default_rng(3)

    def tensors(_step: int) -> dict[str, np.ndarray]:
        logits = rng.normal(size=(16, 5)).astype(np.float32)
        fed = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True) if softmax else logits
        return {
            "CrossEntropyLoss_input_0": fed.astype(np.float32),
            "CrossEntropyLoss_output_0": np.float32(1.6),
        }

    return run_in_evaluator(stack, [RULE], STEPS, tensors, collections=COLLECTIONS)


def test_softmax_before_cross_entropy_fires_in_the_evaluator_as_offline(stack: Stack) -> None:
    status, details = _run(stack, softmax=True)["SoftmaxBeforeCrossEntropy"]
    assert status == "IssuesFound", details
    offline = invoke_rule(create_rule("SoftmaxBeforeCrossEntropy", create_trial(TRIAL)))
    assert offline.first_step == 2
    assert "CrossEntropyLoss_input_0" in details
    assert "steps 0..2" in details


def test_logits_into_the_loss_are_quiet_in_the_evaluator(stack: Stack) -> None:
    status, details = _run(stack, softmax=False)["SoftmaxBeforeCrossEntropy"]
    assert status == "NoIssuesFound", details
    assert not details.startswith("NothingEvaluated"), details  # it read the loss's input and judged it

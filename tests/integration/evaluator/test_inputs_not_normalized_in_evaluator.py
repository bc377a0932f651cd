"""InputsNotNormalized in the serverless evaluator on moto: it fires as the steps arrive one notification at
a time (every saved input since the start is history it reads), at the step ``invoke_rule`` names over the
whole trial, and stays quiet on the twin whose inputs are standardised."""

from __future__ import annotations

import numpy as np
from evaluator_stack import TRIAL, Stack
from rule_runs import run_in_evaluator

from tornasole.modes import ModeKeys
from tornasole.rules import create_rule, invoke_rule
from tornasole.rules.builtin.inputs_not_normalized import DEFAULT_MODEL_INPUT_REGEX
from tornasole.trials import create_trial

STEPS, BATCH = 8, 32
RULE = {"RuleConfigurationName": "InputsNotNormalized", "RuleParameters": {}}
COLLECTIONS = {
    "losses": {"name": "losses", "include_regex": ["[Ll]oss_(?!input).*output"]},
    "model_input": {"name": "model_input", "include_regex": [DEFAULT_MODEL_INPUT_REGEX]},
}


def _run(stack: Stack, scale: float) -> dict[str, tuple[str, str]]:
    """TRAIN steps of a batch of standardised features times ``scale``, every other one a validation batch."""
    rng = np.random.default_rng(5)

    def tensors(step: int) -> dict[str, np.ndarray]:
        x = (rng.normal(size=(BATCH, 6)) * scale).astype(np.float32)
        return {"CrossEntropyLoss_output_0": np.float32(1.0), "Net_input_0": x}

    def mode_of(step: int) -> ModeKeys:
        return ModeKeys.EVAL if step % 2 else ModeKeys.TRAIN

    return run_in_evaluator(stack, [RULE], STEPS, tensors, collections=COLLECTIONS, mode_of=mode_of)


def test_unnormalised_inputs_fire_in_the_evaluator_as_offline(stack: Stack) -> None:
    status, details = _run(stack, scale=100.0)["InputsNotNormalized"]
    assert status == "IssuesFound", details
    offline = invoke_rule(create_rule("InputsNotNormalized", create_trial(TRIAL)))
    assert offline.first_step == 3  # 128 samples of both modes by the fourth step (threshold_samples 100)
    assert f"step {offline.first_step} " in details
    assert "Net_input_0" in details
    assert "normalise the inputs" in details


def test_standardised_inputs_are_judged_and_quiet_in_the_evaluator(stack: Stack) -> None:
    status, details = _run(stack, scale=1.0)["InputsNotNormalized"]
    assert status == "NoIssuesFound", details
    assert not details.startswith("NothingEvaluated"), details

"""DataReplay and AttentionLogitGrowth in the serverless evaluator on moto: each fires at its failure as the
steps arrive one notification at a time (loading only the history each rule says it reads), at the step
``invoke_rule`` names over the whole trial, and stays quiet on the healthy twin (a second epoch that repeats
the first's order, logits that stay under the cap)."""

from __future__ import annotations

import numpy as np
from evaluator_stack import TRIAL, Stack
from test_completion import summary

from tornasole.core.batch_fingerprint import fingerprint_record
from tornasole.format.writer import StepWriter
from tornasole.jobs import TornasoleJobs
from tornasole.modes import ModeKeys
from tornasole.rules import create_rule, invoke_rule
from tornasole.trials import create_trial

STEPS = 30
EPOCH = 12
RESUME = 20  # resumed here from the checkpoint of step 16, the loader not restored: 16.. again

RULES = [
    {"RuleConfigurationName": "DataReplay", "RuleParameters": {"window": "32"}},
    {"RuleConfigurationName": "AttentionLogitGrowth", "RuleParameters": {}},
]


def _tensors(step: int, broken: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    data = rng.integers(0, 64, size=(EPOCH, 4, 8))
    position, epoch = step % EPOCH, step // EPOCH  # no shuffling: epoch 1 repeats epoch 0's order
    if broken and step >= RESUME:
        position = (16 + step - RESUME) % EPOCH
    logit = 6.0 + 0.05 * step
    if broken and step >= RESUME:
        logit = 6.0 * 1.6 ** (step - RESUME + 1)
    return {
        "batch_fingerprint/input": fingerprint_record(data[position], epoch),
        "scalar/attention_logit_max/blocks.0.attn": np.float32(logit),
        "loss": np.float32(2.0),
    }


def _run(stack: Stack, broken: bool) -> dict[str, tuple[str, str]]:
    TornasoleJobs().register_job("my-job", TRIAL, RULES)
    stack.write_collections()
    for step in range(STEPS):
        sw = StepWriter(step, "worker_0", mode=ModeKeys.TRAIN, mode_step=step)
        for name, value in _tensors(step, broken).items():
            sw.add_tensor(name, value, wall_time=1.0)
        stack.writer().write_step(sw)
        for note in stack.notifications():
            stack.deliver(note)
    stack.write_end()
    for note in stack.notifications():
        stack.deliver(note)
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    return summary()


def test_replay_and_logit_growth_fire_in_the_evaluator_as_offline(stack: Stack) -> None:
    got = _run(stack, broken=True)
    expected = {"DataReplay": RESUME + 2, "AttentionLogitGrowth": None}
    for conf in RULES:
        name = conf["RuleConfigurationName"]
        status, details = got[name]
        assert status == "IssuesFound", (name, details)
        offline = invoke_rule(create_rule(name, create_trial(TRIAL), **conf["RuleParameters"]))
        assert offline.status == "IssuesFound", name
        if expected[name] is not None:
            assert offline.first_step == expected[name]
        assert f"step {offline.first_step}" in details or str(offline.first_step) in details, (name, details)
    assert "trained on the batches of steps 16..18 (epoch 1)" in got["DataReplay"][1]
    assert "blocks.0.attn" in got["AttentionLogitGrowth"][1]


def test_the_healthy_twin_is_quiet_in_the_evaluator(stack: Stack) -> None:
    got = _run(stack, broken=False)
    assert {name: status for name, (status, _) in got.items()} == {
        conf["RuleConfigurationName"]: "NoIssuesFound" for conf in RULES
    }

"""A training run streamed through the serverless evaluator step by step, and the checks that a rule
judges it there as ``invoke_rule`` does over the whole trial: shared by the tests of rule families
(``test_llm_rules_in_evaluator``, ``test_replay_and_logit_rules_in_evaluator``, the loss-input rules')."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from evaluator_stack import TRIAL, Stack
from test_completion import summary

from tornasole.format.writer import StepWriter
from tornasole.jobs import TornasoleJobs
from tornasole.modes import ModeKeys
from tornasole.rules import create_rule, invoke_rule
from tornasole.trials import create_trial

__all__ = ["assert_each_fires_as_offline", "assert_all_quiet", "run_in_evaluator"]


def run_in_evaluator(
    stack: Stack,
    rules: list[dict[str, Any]],
    steps: int,
    tensors: Callable[[int], Mapping[str, np.ndarray]],
    collections: Mapping[str, Mapping[str, Any]] | None = None,
    mode_of: Callable[[int], ModeKeys] = lambda _step: ModeKeys.TRAIN,
) -> dict[str, tuple[str, str]]:
    """Register ``rules``, write ``steps`` steps of ``tensors(step)`` in mode ``mode_of(step)`` (each mode
    counting its own steps), deliver each step's notifications as it lands (rules load only the history
    they say they read), end the run; each rule's ``(status, details)`` once the job completed.
    ``collections``: the run's collection file (default: the stack's)."""
    TornasoleJobs().register_job("my-job", TRIAL, rules)
    if collections is None:
        stack.write_collections()
    else:
        stack.writer().write_collections(collections, 1)
    mode_steps: dict[ModeKeys, int] = {}
    for step in range(steps):
        mode = mode_of(step)
        sw = StepWriter(step, "worker_0", mode=mode, mode_step=mode_steps.get(mode, 0))
        mode_steps[mode] = mode_steps.get(mode, 0) + 1
        for name, value in tensors(step).items():
            sw.add_tensor(name, value, wall_time=1.0)
        stack.writer().write_step(sw)
        for note in stack.notifications():
            stack.deliver(note)
    stack.write_end()
    for note in stack.notifications():
        stack.deliver(note)
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    return summary()


def assert_each_fires_as_offline(
    got: Mapping[str, tuple[str, str]], rules: list[dict[str, Any]], expected_step: Mapping[str, int]
) -> None:
    """Every rule found issues in the evaluator and offline, its details name the step ``invoke_rule``
    names, and that step is ``expected_step[rule]`` where given."""
    for conf in rules:
        name = conf["RuleConfigurationName"]
        status, details = got[name]
        assert status == "IssuesFound", (name, details)
        offline = invoke_rule(create_rule(name, create_trial(TRIAL), **conf["RuleParameters"]))
        assert offline.status == "IssuesFound", name
        assert offline.first_step is not None, name
        if name in expected_step:
            assert offline.first_step == expected_step[name], (name, offline.first_step)
        assert f"step {offline.first_step}" in details or str(offline.first_step) in details, (name, details)


def assert_all_quiet(got: Mapping[str, tuple[str, str]], rules: list[dict[str, Any]]) -> None:
    """The healthy twin: every rule ended ``NoIssuesFound``."""
    assert {name: status for name, (status, _) in got.items()} == {
        conf["RuleConfigurationName"]: "NoIssuesFound" for conf in rules
    }

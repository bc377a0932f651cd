"""A custom rule's own process answers with one reply, the same in the sandbox function and in the
local mode's forked child (``sandbox.rule_process.rule_reply``), from the windows it was sent."""

from __future__ import annotations

import json
from typing import Any

import grimp
import pytest

from tornasole.evaluator.failures import TransientError
from tornasole.evaluator.models import MAX_HISTORY_STEPS, RuleConfig, StepFiles, StepOutcome
from tornasole.evaluator.sandbox.rule_process import rule_reply
from tornasole.evaluator.sandbox.wire import history_from_windows, outcome_from_reply, rule_windows

RULE = RuleConfig(name="Custom", rule_to_invoke="Custom", source_s3_uri="s3://b/rules/custom.py")
FILES = StepFiles(7, ("worker_0", "worker_1"))


class Runs:
    """A step runner that answers ``outcome`` (or raises ``failure``) and keeps what it was given."""

    def __init__(self, outcome: StepOutcome | None = None, failure: BaseException | None = None) -> None:
        self.outcome, self.failure, self.calls = outcome, failure, []

    def run(
        self,
        job: str,
        trial: str,
        files: StepFiles,
        rules: list,
        history: Any = None,
        remaining_s: Any = None,
    ) -> list[StepOutcome]:
        self.calls.append((job, trial, files, list(rules), history, remaining_s))
        if self.failure is not None:
            raise self.failure
        return [self.outcome]


def test_the_reply_carries_the_rules_outcome_and_reads_back_as_it() -> None:
    outcome = StepOutcome("Custom", 7, fired=True, details="loss went up")
    runner = Runs(outcome)
    reply = rule_reply(runner, "job-a", "s3://b/t", FILES, RULE, ((6, ("worker_0",)),), ())
    kind, back = outcome_from_reply(json.dumps(reply).encode(), RULE, 7)
    assert kind == "fired"
    assert back.fired
    assert back.details == "loss went up"
    ((job, trial, files, rules, history, _),) = runner.calls
    assert (job, trial, files, rules) == ("job-a", "s3://b/t", FILES, [RULE])
    assert history(5, 0) == [(6, ("worker_0",))]


def test_a_transient_failure_is_a_transient_reply_so_the_step_is_retried() -> None:
    reply = rule_reply(Runs(failure=TransientError("connection reset")), "j", "s3://b/t", FILES, RULE, (), ())
    assert reply == {"kind": "transient", "reason": "connection reset"}


def test_any_other_failure_is_not_turned_into_a_reply() -> None:
    with pytest.raises(KeyError):
        rule_reply(Runs(failure=KeyError("bug")), "j", "s3://b/t", FILES, RULE, (), ())


def test_the_windows_sent_rebuild_the_evaluators_history() -> None:
    steps = [(s, ("worker_0",)) for s in range(100, 0, -1)]  # newest first, more than a window holds

    def history(depth: int, lead: int) -> list[tuple[int, tuple[str, ...]]]:
        recent = steps[:depth]
        seen = {s for s, _ in recent}
        return recent + [p for p in sorted(steps)[:lead] if p[0] not in seen]

    recent, first = rule_windows(history)
    assert len(recent) == len(first) == MAX_HISTORY_STEPS
    rebuilt = history_from_windows(recent, first)
    for depth, lead in [(0, 0), (10, 0), (0, 10), (22, 5), (MAX_HISTORY_STEPS, MAX_HISTORY_STEPS)]:
        assert rebuilt(depth, lead) == history(depth, lead)
    assert rule_windows(None) == ((), ())


def test_the_local_mode_runs_rules_without_the_lambda_handler() -> None:
    """The forked child once borrowed the sandbox function's handler module; both now share the
    evaluator's sandbox package and neither reaches into the other."""
    graph = grimp.build_graph("tornasole", cache_dir=None)
    assert graph.chain_exists("tornasole.local.rule_child", "tornasole.evaluator.sandbox.rule_process")
    handler = "tornasole.lambda_support.handlers.custom_rule"
    assert not graph.chain_exists("tornasole.local.rule_child", handler)
    assert graph.direct_import_exists(
        importer="tornasole.lambda_support.handlers.custom_rule",
        imported="tornasole.evaluator.sandbox.rule_process",
    )

"""A sandboxed custom rule's failure is that rule's alone (issue #34 N5).

``custom_rules`` is the runner's collaborator for the rule sandbox (``sandbox.rule_runners``); here a
stand-in whose ``evaluate`` fails as the sandbox's client can: a dropped connection (transient)
or a reply on the pipe that does not parse (the rule's own doing).
"""

from __future__ import annotations

from typing import Any

import pytest

from tornasole.evaluator import runner
from tornasole.evaluator.models import RuleConfig, StepOutcome
from tornasole.evaluator.runner import StepFiles, StepRunner

A = RuleConfig(name="A", rule_to_invoke="A", source_s3_uri="s3://b/rules/a.py")
B = RuleConfig(name="B", rule_to_invoke="B", source_s3_uri="s3://b/rules/b.py")


class SandboxClient:
    """Fails ``A`` as told ``failures`` times, then answers; ``B`` always answers."""

    def __init__(self, failure: BaseException, failures: int) -> None:
        self.failure, self.failures, self.calls = failure, failures, 0

    def evaluate(self, job: str, trial: str, files: StepFiles, rule: RuleConfig, *_: Any) -> StepOutcome:
        if rule.name == "A":
            self.calls += 1
            if self.calls <= self.failures:
                raise self.failure
        return StepOutcome(rule.name, files.step, fired=True, details=f"{rule.name} fired")


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "CUSTOM_RULE_BACKOFF_S", 0.0, raising=False)


def run(client: SandboxClient) -> dict[str, StepOutcome]:
    outcomes = StepRunner(custom_rules=client).run("j", "s3://b/t", StepFiles(7, ("w",)), [A, B])
    return {o.rule_name: o for o in outcomes}


def test_a_transient_failure_is_tried_again_for_that_rule_alone() -> None:
    client = SandboxClient(ConnectionError("reset"), failures=2)
    got = run(client)
    assert client.calls == 3
    assert got["A"].fired
    assert got["B"].fired


def test_a_persistent_transient_failure_gives_up_the_step_for_that_rule_only() -> None:
    client = SandboxClient(ConnectionError("reset"), failures=99)
    got = run(client)
    assert client.calls == runner.CUSTOM_RULE_TRIES
    assert got["A"].step_error.startswith("A: step 7 given up after 3 tries with a transient error")
    assert not got["A"].error
    assert got["B"].fired


def test_a_forged_reply_is_the_rules_own_error() -> None:
    got = run(SandboxClient(ValueError("reply is not a sandbox_wire message"), failures=99))
    assert got["A"].error == "A: ValueError: reply is not a sandbox_wire message"
    assert got["B"].fired

"""Every firing says what to do: the built-in rules' likely cause and suggested fix travel in the outcome and
show in ``jobs status``, the issue event and the alert message (fails before the advice existed)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from moto import mock_aws

from tornasole.evaluator import decisions
from tornasole.evaluator.details import describe
from tornasole.evaluator.models import (
    JobState,
    JobStatus,
    RuleConfig,
    RuleState,
    RuleStatus,
    StepOutcome,
    job_arn,
)
from tornasole.rules import invoke_rule, rule_names
from tornasole.rules.actions import Action
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.loss_not_decreasing import LossNotDecreasing
from tornasole.rules.generic import VanishingGradient, WeightUpdateRatio
from tornasole.rules.outcome import MAX_DETAILS, RuleOutcome, split_advice
from tornasole.rules.registry import get_rule

VANISHED = {s: {"gradients/fc1.weight": [1e-9, -1e-9], "gradients/fc2.weight": [0.1, 0.2]} for s in range(2)}


def _fired(trial_factory) -> RuleOutcome:
    summary = invoke_rule(VanishingGradient(trial_factory(VANISHED)))
    return summary.fired[0]


def test_every_builtin_rule_has_a_likely_cause_and_a_fix():
    builtins = [get_rule(n) for n in rule_names() if issubclass(get_rule(n), BuiltinRule)]
    assert len(builtins) >= 20
    missing = [r.__name__ for r in builtins if not (r.LIKELY_CAUSE and r.SUGGESTED_FIX)]
    assert missing == []


def test_a_firing_carries_its_advice_in_the_outcome(trial_factory):
    out = _fired(trial_factory)
    assert out.advice.startswith("Likely cause: the gradients of gradients/fc1.weight have vanished")
    assert "Suggested fix: use ReLU activations" in out.advice
    finding, advice = split_advice(out.details)
    assert finding.endswith("mean(|gradients/fc1.weight|)=1e-09 < threshold 1e-07")
    assert advice == out.advice
    assert out.to_dict()["StatusDetails"].endswith(out.advice)


def test_advice_depends_on_the_finding(trial_factory):
    weights = {s: {"weights/fc1.weight": [[1.0 + 100.0 * s, 1.0]]} for s in range(2)}
    (out,) = invoke_rule(WeightUpdateRatio(trial_factory(weights))).fired[:1]
    assert "learning rate too high" in out.advice
    frozen = {s: {"weights/fc1.weight": [[1.0, 1.0]]} for s in range(2)}
    (out,) = invoke_rule(WeightUpdateRatio(trial_factory(frozen))).fired[:1]
    assert "barely moves" in out.advice


def test_long_findings_are_cut_and_the_advice_kept_whole():
    advice = "Likely cause: x. Suggested fix: y."
    out = RuleOutcome.build("R", 1, True, "TRAIN", 1, ["z" * 3000], {}, advice=advice)
    assert len(out.details) == MAX_DETAILS
    assert out.details.endswith("... " + advice) or out.details.endswith(". " + advice)
    assert RuleOutcome.build("R", 1, False, None, None, [], {}, advice=advice).advice == ""


def _state(details: str = "") -> JobState:
    config = RuleConfig(
        "VanishingGradient", "VanishingGradient", actions=(Action("email", "ml@example.com"),)
    )
    return JobState(
        name="job-1",
        arn=job_arn("job-1", account="123456789012"),
        trial_path="s3://b/run",
        status=JobStatus.IN_PROGRESS,
        seq=3,
        rules_rev=1,
        rules=(
            RuleState(
                config, RuleStatus.ISSUES_FOUND if details else RuleStatus.IN_PROGRESS, details=details
            ),
        ),
    )


def test_the_issue_event_and_the_alert_say_what_to_do(trial_factory):
    out = _fired(trial_factory)
    step = StepOutcome("VanishingGradient", out.step, fired=True, mode=out.mode, details=out.details)
    items = decisions.issue_extras(_state(), step, ["worker_0"])
    event = next(i for i in items if i.kind == "event")
    assert event.payload["detail"]["StatusDetails"].endswith(out.advice)
    alert = next(i for i in items if i.kind == "alert")
    assert out.advice in alert.payload["message"].splitlines()  # a line of its own
    subject, body = alert.payload["subject"], alert.payload["message"]
    assert "Suggested fix: use ReLU activations" in body
    assert "Tornasole: VanishingGradient" in subject


def test_describe_shows_the_advice(trial_factory):
    out = _fired(trial_factory)
    (status,) = describe(_state(out.details))["DebugRuleEvaluationStatuses"]
    assert status["StatusDetails"].endswith(out.advice)


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from tornasole.local.resources import create_resources

    monkeypatch.setenv("TORNASOLE_STATE_TABLE", "tornasole-state")
    with mock_aws():
        create_resources("trials")
        yield


def test_jobs_status_prints_each_firings_advice_in_full(stack, trial_factory, capsys):
    from tornasole.cli.main import main
    from tornasole.evaluator.store.transitions import Transitions
    from tornasole.jobs import TornasoleJobs

    assert (
        main(
            [
                "jobs",
                "register",
                "--name",
                "j1",
                "--s3-output",
                "s3://trials/j1",
                "--rule",
                "VanishingGradient",
            ]
        )
        == 0
    )
    out = _fired(trial_factory)
    fired = StepOutcome("VanishingGradient", out.step, fired=True, mode=out.mode, details=out.details)
    Transitions(TornasoleJobs().table).apply("j1", decisions.after_outcomes([fired]), int(time.time() * 1000))
    capsys.readouterr()
    assert main(["jobs", "status", "j1"]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[-2:] == ["what to do:", f"  VanishingGradient: {out.advice}"]


def test_a_flat_loss_is_told_it_may_be_a_plateau(trial_factory):
    """A loss that does not move may be a plateau the run leaves later (the held-out lstm family's healthy
    runs sit at chance for epochs before they learn): the advice says so beside the usual causes."""

    flat = {s: {"losses/loss": 1.386} for s in range(40)}
    (out,) = invoke_rule(LossNotDecreasing(trial_factory(flat), num_steps="10")).fired[:1]
    assert "sit at chance for several epochs first" in out.advice
    assert "a few more epochs first" in out.advice

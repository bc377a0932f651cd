"""email/sms actions notify when a rule finds an issue, then at most once per reminder interval.

Counted at the alert topic (its SQS subscription), with the per-step issue events on the bus alongside:
those stay one per firing step.
"""

from __future__ import annotations

import json

import pytest
from evaluator_stack import TRIAL, Stack

import tornasole.evaluator.store.outbox as outbox
from tornasole.jobs import Rule, TornasoleJobs
from tornasole.rules.actions import parse_actions
from tornasole.stack_spec import DETAIL_TYPE_RULE_ISSUE_FOUND


def vg(actions: list[dict]) -> Rule:
    base = {"DebugRuleConfiguration": {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {}}}
    return Rule.sagemaker(base, rule_parameters={"threshold": "0.001", "action_json": json.dumps(actions)})


def fire(stack: Stack, steps: range) -> None:
    for step in steps:
        stack.write_step(step, grad=1e-6)  # VanishingGradient fires at every one of these steps
    for note in stack.notifications():
        stack.deliver(note)
    stack.pump_stream()


def by_action(alerts: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for a in alerts:
        name = a["MessageAttributes"]["tornasole_action"]["Value"]
        counts[name] = counts.get(name, 0) + 1
    return counts


def issue_events(stack: Stack) -> list[dict]:
    return [e for e in stack.events() if e["detail-type"] == DETAIL_TYPE_RULE_ISSUE_FOUND]


def test_one_message_per_problem_not_one_per_firing_step(stack: Stack) -> None:
    actions = [
        {"name": "email", "endpoint": "ml@example.com"},  # the default interval: 60 minutes
        {"name": "sms", "endpoint": "+15551234567", "reminder_minutes": 0},  # every firing, as asked
    ]
    TornasoleJobs().register_job("my-job", TRIAL, [vg(actions)])
    stack.write_collections()
    stack.events()
    fire(stack, range(0, 45, 5))  # 9 firing steps
    assert by_action(stack.alerts()) == {"email": 1, "sms": 9}
    assert len(issue_events(stack)) == 9  # the bus still gets one issue event per firing step
    assert TornasoleJobs().describe("my-job")["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] == (
        "IssuesFound"
    )


def test_a_reminder_once_the_interval_has_passed(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    TornasoleJobs().register_job(
        "my-job", TRIAL, [vg([{"name": "email", "endpoint": "ml@example.com", "reminder_minutes": 30}])]
    )
    stack.write_collections()
    real_now = outbox._now_ms
    fire(stack, range(0, 20, 5))
    assert by_action(stack.alerts()) == {"email": 1}  # the transition to IssuesFound

    monkeypatch.setattr(outbox, "_now_ms", lambda: real_now() + 29 * 60_000)
    fire(stack, range(20, 30, 5))
    assert stack.alerts() == []  # still firing, within the interval: quiet

    monkeypatch.setattr(outbox, "_now_ms", lambda: real_now() + 31 * 60_000)
    fire(stack, range(30, 45, 5))
    (reminder,) = stack.alerts()  # one reminder for three firing steps
    assert "Rule VanishingGradient found issues in training job my-job" in reminder["Message"]


def test_reminder_minutes_is_validated_at_registration(stack: Stack) -> None:
    with pytest.raises(Exception, match="reminder_minutes 'soon' must be a number of minutes"):
        TornasoleJobs().register_job(
            "my-job", TRIAL, [vg([{"name": "email", "endpoint": "a@b.c", "reminder_minutes": "soon"}])]
        )
    (action,) = parse_actions("R", '[{"name": "sms", "endpoint": "+1555"}]')
    assert action.reminder_ms == 60 * 60_000

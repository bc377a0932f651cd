"""webhook/slack/teams actions: named destinations only, one alert event per problem with the
documented body, reminders as for e-mail; e-mail carries the same facts as plain text."""

from __future__ import annotations

import json

import pytest
from evaluator_stack import TRIAL, Stack

import tornasole.evaluator.store.outbox as outbox
from alert_checks import assert_valid_alert, assert_valid_alert_event_detail
from tornasole import config
from tornasole.alerts.destinations import DETAIL_TYPE_ALERT
from tornasole.exceptions import InvalidJobConfiguration
from tornasole.jobs import Rule, TornasoleJobs


def vg(actions: list[dict]) -> Rule:
    base = {"DebugRuleConfiguration": {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {}}}
    return Rule.sagemaker(base, rule_parameters={"threshold": "0.001", "action_json": json.dumps(actions)})


def fire(stack: Stack, steps: range, grad: float = 1e-6) -> None:
    for step in steps:
        stack.write_step(step, grad=grad)
    for note in stack.notifications():
        stack.deliver(note)
    stack.pump_stream()


def alert_events(stack: Stack) -> list[dict]:
    return [e for e in stack.events() if e["detail-type"] == DETAIL_TYPE_ALERT]


@pytest.fixture
def destinations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.ALERT_DESTINATIONS, "webhook:oncall,slack:ml-team")


def test_an_unconfigured_destination_is_refused_naming_the_rule_and_the_action(
    stack: Stack, destinations: None
) -> None:
    with pytest.raises(InvalidJobConfiguration) as err:
        TornasoleJobs().register_job("my-job", TRIAL, [vg([{"name": "webhook", "endpoint": "pager"}])])
    text = str(err.value)
    assert "'VanishingGradient'" in text
    assert "webhook:pager" in text
    assert "configured here: webhook:oncall" in text
    assert TornasoleJobs().list_jobs() == []  # nothing was registered


def test_with_no_destination_configured_every_destination_action_is_refused(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(config.ALERT_DESTINATIONS, raising=False)
    with pytest.raises(InvalidJobConfiguration, match="TORNASOLE_ALERT_DESTINATIONS is unset"):
        TornasoleJobs().register_job("my-job", TRIAL, [vg([{"name": "teams", "endpoint": "ops"}])])


def test_a_url_is_never_a_destination(stack: Stack, destinations: None) -> None:
    with pytest.raises(InvalidJobConfiguration, match="never a URL"):
        TornasoleJobs().register_job(
            "my-job", TRIAL, [vg([{"name": "webhook", "endpoint": "https://evil.example/collect"}])]
        )


def test_one_alert_event_per_problem_then_one_reminder(
    stack: Stack, destinations: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    actions = [{"name": "webhook", "endpoint": "oncall", "reminder_minutes": 30}]
    TornasoleJobs().register_job("my-job", TRIAL, [vg(actions)])
    job = TornasoleJobs().describe("my-job")
    # the job's configuration carries the destination's name only
    assert json.loads(job["DebugRuleConfigurations"][0]["RuleParameters"]["action_json"]) == [
        {"name": "webhook", "endpoint": "oncall", "reminder_minutes": 30}
    ]
    stack.write_collections()
    stack.events()
    real_now = outbox._now_ms
    fire(stack, range(0, 20, 5))  # 4 firing steps
    (first,) = alert_events(stack)
    detail = first["detail"]
    assert_valid_alert_event_detail(detail)
    assert detail["Destination"] == "webhook:oncall"
    body = detail["Alert"]
    assert body["Reminder"] is False
    assert (body["TrainingJobName"], body["RuleConfigurationName"], body["Step"]) == (
        "my-job",
        "VanishingGradient",
        0,
    )
    assert body["Tensor"] == "gradients/fc.weight"
    assert body["Value"] == pytest.approx(1e-6)
    assert body["Threshold"] == pytest.approx(0.001)
    assert body["LikelyCause"]
    assert body["SuggestedFix"]
    assert body["NextCommands"][0] == "tornasole jobs status my-job"
    assert body["StepFiles"]["IndexFiles"][0].startswith(TRIAL)
    assert first["resources"] == [body["TrainingJobArn"]]

    monkeypatch.setattr(outbox, "_now_ms", lambda: real_now() + 29 * 60_000)
    fire(stack, range(20, 30, 5))
    assert alert_events(stack) == []  # within the interval: quiet

    monkeypatch.setattr(outbox, "_now_ms", lambda: real_now() + 31 * 60_000)
    fire(stack, range(30, 45, 5))
    (reminder,) = alert_events(stack)
    assert_valid_alert_event_detail(reminder["detail"])
    assert reminder["detail"]["Alert"]["Reminder"] is True
    assert reminder["detail"]["Alert"]["Step"] == 30
    assert reminder["detail"]["Slack"]["blocks"][0]["text"]["text"].startswith("Reminder: ")


def test_a_healthy_run_sends_no_alert(stack: Stack, destinations: None) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [vg([{"name": "slack", "endpoint": "ml-team"}])])
    stack.write_collections()
    fire(stack, range(0, 20, 5), grad=1.0)
    assert alert_events(stack) == []


def test_the_email_says_the_same_facts_in_plain_text(stack: Stack, destinations: None) -> None:
    actions = [{"name": "email", "endpoint": "ml@example.com"}, {"name": "webhook", "endpoint": "oncall"}]
    TornasoleJobs().register_job("my-job", TRIAL, [vg(actions)])
    stack.write_collections()
    stack.events()
    fire(stack, range(0, 10, 5))
    (mail,) = stack.alerts()
    (event,) = alert_events(stack)
    body = event["detail"]["Alert"]
    assert_valid_alert(body)
    text = mail["Message"]
    assert body["Finding"] in text
    assert f"Tensor: {body['Tensor']}; value 1e-06, threshold 0.001" in text
    assert f"Likely cause: {body['LikelyCause']}. Suggested fix: {body['SuggestedFix']}." in text.splitlines()
    for command in body["NextCommands"]:
        assert command in text
    assert mail["Subject"] == "Tornasole: VanishingGradient found issues in my-job"


def test_a_stall_alerts_its_destinations_once(stack: Stack, destinations: None) -> None:
    import time

    from tornasole.evaluator.service import Evaluator
    from tornasole.evaluator.store.state_table import StateTable
    from tornasole.lambda_support.env import HandlerEnv

    stalled = Rule.sagemaker(
        {"DebugRuleConfiguration": {"RuleConfigurationName": "StalledTrainingRule", "RuleParameters": {}}},
        rule_parameters={
            "threshold": "60",
            "action_json": json.dumps(
                [{"name": "webhook", "endpoint": "oncall"}, {"name": "email", "endpoint": "a@b.c"}]
            ),
        },
    )
    TornasoleJobs().register_job("my-job", TRIAL, [stalled])
    env = HandlerEnv.from_environ()

    def check(offset: float) -> None:
        evaluator = Evaluator(
            StateTable(env.state_table),
            outbox.OutboxPublisher.from_env(env),
            clock=lambda: time.time() + offset,
        )
        evaluator.scheduled_check()
        stack.pump_stream()

    check(120)
    check(240)  # the rule is IssuesFound already: no second alert
    (event,) = alert_events(stack)
    body = event["detail"]["Alert"]
    assert_valid_alert_event_detail(event["detail"])
    assert (body["RuleConfigurationName"], body["Step"], body["Tensor"]) == (
        "StalledTrainingRule",
        None,
        None,
    )
    assert body["Value"] >= 60
    assert body["Threshold"] == 60
    assert body["Finding"].startswith("StalledTrainingRule: no new step for")
    (mail,) = stack.alerts()
    assert "Rule StalledTrainingRule found issues in training job my-job." in mail["Message"]


def test_jobs_register_action_refuses_an_unconfigured_destination_and_takes_a_configured_one(
    stack: Stack, destinations: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from tornasole.cli.main import main

    base = ["jobs", "register", "--name", "my-job", "--s3-output", TRIAL, "--rule", "VanishingGradient"]
    assert main([*base, "--action", "webhook:pager"]) == 2
    err = capsys.readouterr().err
    assert "'VanishingGradient'" in err
    assert "webhook:pager" in err
    assert main([*base, "--action", "webhook:oncall", "--action", "slack:ml-team"]) == 0
    (params,) = [r["RuleParameters"] for r in TornasoleJobs().describe("my-job")["DebugRuleConfigurations"]]
    assert json.loads(params["action_json"]) == [
        {"name": "webhook", "endpoint": "oncall"},
        {"name": "slack", "endpoint": "ml-team"},
    ]

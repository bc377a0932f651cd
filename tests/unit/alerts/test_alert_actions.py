"""Destination actions in action_json and on the command line: names only, checked against the
operator's list; the alert body and its renderings within their documented limits."""

from __future__ import annotations

import argparse
import json

import pytest

from alert_checks import assert_valid_alert, assert_valid_chatbot, assert_valid_slack, assert_valid_teams
from tornasole import config
from tornasole.alerts.body import alert_body, split_cause_and_fix
from tornasole.alerts.destinations import configured_destinations, destination_problems
from tornasole.alerts.render import chatbot_notification, slack_message, teams_message, text_message
from tornasole.cli.jobs_register import rule_configurations
from tornasole.exceptions import RuleParameterError
from tornasole.rules.actions import Action, parse_actions


def test_destination_actions_parse_with_their_name_and_reminder() -> None:
    actions = parse_actions(
        "R",
        '[{"name": "Webhook", "endpoint": "oncall"}, {"name": "slack", "endpoint": "ml-team", '
        '"reminder_minutes": 5}, {"name": "teams", "endpoint": "ops.eu"}]',
    )
    assert [a.destination for a in actions] == ["webhook:oncall", "slack:ml-team", "teams:ops.eu"]
    assert actions[1].reminder_ms == 5 * 60_000
    assert actions[0].to_dict() == {"name": "webhook", "endpoint": "oncall"}
    assert Action("email", "a@b.c").destination is None


@pytest.mark.parametrize(
    "endpoint",
    ["https://hooks.slack.com/services/T/B/X", "http://127.0.0.1:9/x", "evil.example/x", "a" * 65, "-x"],
)
def test_a_url_or_odd_name_is_refused_naming_the_rule(endpoint: str) -> None:
    with pytest.raises(RuleParameterError, match=r"never a URL") as err:
        parse_actions("MyRule", [{"name": "webhook", "endpoint": endpoint}])
    assert "MyRule" in str(err.value)
    assert "action #0 (webhook)" in str(err.value)


def test_destination_problems_name_the_rule_the_action_and_what_exists() -> None:
    actions = parse_actions("R", [{"name": "email", "endpoint": "a@b.c"}, {"name": "slack", "endpoint": "x"}])
    configured = frozenset({"slack:ml-team", "webhook:oncall"})
    (problem,) = destination_problems("R", actions, configured)
    assert "rule 'R'" in problem
    assert "action #1 (slack:x)" in problem
    assert "configured here: slack:ml-team" in problem
    assert "webhook:oncall" not in problem
    assert (
        destination_problems("R", parse_actions("R", [{"name": "slack", "endpoint": "ml-team"}]), configured)
        == []
    )


def test_the_operators_list_is_read_and_checked() -> None:
    env = {config.ALERT_DESTINATIONS: " webhook:oncall , Slack:ml-team,"}
    assert configured_destinations(env) == {"webhook:oncall", "slack:ml-team"}
    assert configured_destinations({}) == frozenset()
    with pytest.raises(ValueError, match="TORNASOLE_ALERT_DESTINATIONS: alert destination 'pager:x'"):
        configured_destinations({config.ALERT_DESTINATIONS: "pager:x"})


def _args(*actions: str) -> argparse.Namespace:
    return argparse.Namespace(
        action=list(actions), rule=["VanishingGradient"], rule_file=None, rule_class=None
    )


def test_jobs_register_action_takes_destinations() -> None:
    (rule,) = rule_configurations(_args("webhook:oncall", "slack:ml-team", "teams:ops", "stoptraining"))
    assert json.loads(rule["RuleParameters"]["action_json"]) == [
        {"name": "webhook", "endpoint": "oncall"},
        {"name": "slack", "endpoint": "ml-team"},
        {"name": "teams", "endpoint": "ops"},
        {"name": "stoptraining"},
    ]
    with pytest.raises(ValueError, match="webhook:NAME"):
        rule_configurations(_args("webhook:"))


def _body(**over) -> dict:
    args = {
        "job": "job-1",
        "job_arn": "arn:aws:tornasole:us-east-1:123456789012:training-job/job-1",
        "job_status": "InProgress",
        "rule": "ExplodingTensor",
        "step": 40,
        "mode": "TRAIN",
        "mode_step": 40,
        "details": "ExplodingTensor: condition met at step 40 (TRAIN 40): gradients/w has 3 NaN. "
        "Likely cause: the learning rate is too high. Suggested fix: lower it 10x or clip gradients.",
        "values": {"tensor": "gradients/w", "value": float("nan"), "threshold": 0, "nan_count": 3},
        "files": {"TrialPath": "s3://b/job-1", "IndexFiles": ["s3://b/job-1/index/x.json"], "EventFiles": []},
        "event_id": "job-1:1:alert/ExplodingTensor/40/0",
    }
    args.update(over)
    return alert_body(**args)


def test_the_body_carries_every_fact_and_validates() -> None:
    body = _body()
    assert_valid_alert(body)
    assert (body["Tensor"], body["Value"], body["Threshold"]) == ("gradients/w", "nan", 0)
    assert body["Values"]["nan_count"] == 3
    assert body["LikelyCause"] == "the learning rate is too high"
    assert body["SuggestedFix"] == "lower it 10x or clip gradients"
    assert body["Finding"].endswith("gradients/w has 3 NaN")
    assert body["NextCommands"] == [
        "tornasole jobs status job-1",
        "tornasole jobs logs job-1 --rule ExplodingTensor --issues-only",
        "tornasole plot s3://b/job-1 --tensor gradients/w --job job-1 -o job-1.png",
    ]
    assert body["ReportLocation"] is None
    assert (
        _body(values={"report": "s3://b/job-1/report.html"})["ReportLocation"] == "s3://b/job-1/report.html"
    )


def test_a_firing_without_numbers_or_advice_still_validates() -> None:
    body = _body(
        details="CustomRule: condition met at step 40", values={"tensor": ["a", "b"], "value": [1, 2]}
    )
    assert_valid_alert(body)
    assert (body["Tensor"], body["Value"], body["LikelyCause"], body["SuggestedFix"]) == (
        None,
        None,
        None,
        None,
    )
    assert body["NextCommands"][-1].startswith("tornasole jobs logs")
    subject, text = text_message(body)
    assert "Likely cause" not in text
    assert subject.startswith("Tornasole: ExplodingTensor")


def test_big_values_are_cut_to_a_marked_preview() -> None:
    body = _body(values={"tensor": "t", "per_class": list(range(5000))})
    assert body["Values"]["values_truncated"] is True
    assert len(json.dumps(body["Values"])) < 2 * 2048


def test_renderings_stay_within_their_channels_limits_and_escape_markup() -> None:
    long = "x" * 5000
    body = _body(
        rule="R" * 300, details=f"R: <!channel> {long}. Likely cause: {long}. Suggested fix: {long}."
    )
    assert_valid_alert({**body, "Finding": body["Finding"][:1024]})
    slack = slack_message(body)
    assert_valid_slack(slack)
    assert "<!channel>" not in json.dumps(slack)  # Slack markup from a rule's text is escaped
    assert_valid_teams(teams_message(body))
    assert_valid_chatbot(chatbot_notification(body))
    subject, _ = text_message({**body, "Reminder": True})
    assert len(subject) <= 100
    assert subject.startswith("Tornasole: Reminder: ")


def test_cause_and_fix_are_split_from_the_rules_advice() -> None:
    assert split_cause_and_fix("Likely cause: a. b. Suggested fix: c.") == ("a. b", "c")
    assert split_cause_and_fix("no advice") == (None, None)


def test_the_autouse_check_rejects_a_body_off_its_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    import jsonschema

    import tornasole.alerts.body as body_module
    from alert_checks import check_every_alert

    monkeypatch.setattr(body_module, "alert_body", lambda **kw: {"SchemaVersion": "1"})
    check_every_alert(monkeypatch)
    with pytest.raises(jsonschema.ValidationError, match="'Summary' is a required property"):
        body_module.alert_body(job="j")


def test_a_custom_rules_values_cannot_blow_up_the_bodys_fields() -> None:
    body = _body(values={"tensor": "t" * 5000, "value": "v" * 5000, "threshold": 1, "report": "r" * 5000})
    assert_valid_alert(body)
    assert (len(body["Tensor"]), len(body["Value"]), len(body["ReportLocation"])) == (512, 64, 512)


def test_the_largest_alert_event_fits_eventbridge() -> None:
    from tornasole.alerts.destinations import alert_event_detail
    from tornasole.evaluator.store.event_entries import check_entry

    long = "x" * 2000
    body = _body(
        rule="R" * 256,
        details=f"R: {long}. Likely cause: {long}. Suggested fix: {long}.",
        values={"tensor": "t" * 5000, "value": 1.0, "threshold": 2.0, "big": list(range(10_000))},
        files={
            "TrialPath": "s3://b/" + "p" * 900,
            "IndexFiles": ["s3://b/" + "i" * 1000] * 4096,  # a step of MAX_WORKERS workers
            "EventFiles": ["s3://b/" + "e" * 1000] * 4096,
        },
    )
    detail = alert_event_detail("webhook:oncall", body)
    entry = {
        "Source": "tornasole",
        "DetailType": "Tornasole Alert",
        "Detail": json.dumps(detail, sort_keys=True),
        "Resources": [body["TrainingJobArn"]],
        "EventBusName": "tornasole",
    }
    check_entry(entry)  # raises past EventBridge's 256 KB
    assert len(entry["Detail"].encode()) < 128 * 1024
    assert len(body["StepFiles"]["IndexFiles"]) == 8

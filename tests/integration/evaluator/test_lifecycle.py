"""The lifecycle of EVENTS.md: multi-worker steps, completion, errors, actions, stalled training."""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
from evaluator_stack import BUCKET, TRIAL, Stack, event_ids

from tornasole.aws.clients import client
from tornasole.evaluator.runner import StepRunner, default_rule_factory
from tornasole.evaluator.service import Evaluator
from tornasole.evaluator.store.outbox import OutboxPublisher
from tornasole.evaluator.store.state_table import StateTable
from tornasole.jobs import Rule, TornasoleJobs
from tornasole.lambda_support.env import HandlerEnv
from tornasole.rules import Rule as BaseRule


def vg(name: str = "VanishingGradient", **params: str) -> Rule:
    base = {"DebugRuleConfiguration": {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {}}}
    return Rule.sagemaker(base, name=name, rule_parameters={"threshold": "0.001", **params})


def evaluator(clock_offset: float = 0.0, rule_factory: Any = None) -> Evaluator:
    env = HandlerEnv.from_environ()
    return Evaluator(
        StateTable(env.state_table),
        OutboxPublisher.from_env(env),
        runner=StepRunner(rule_factory) if rule_factory else None,
        clock=lambda: time.time() + clock_offset,
    )


def statuses(job: str = "my-job") -> dict[str, str]:
    return {
        s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in TornasoleJobs().rule_job_summary(job)
    }


def test_multi_worker_step_is_evaluated_once_after_the_last_worker(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [vg()])
    stack.write_collections(num_workers=2, worker="worker_0")
    stack.write_step(0, worker="worker_0", grad=1e-6)
    stack.write_step(0, worker="worker_1", grad=1e-6)
    coll, w0, w1 = stack.notifications()
    assert stack.deliver(coll)["results"][0]["action"] == "num_workers"
    assert stack.deliver(w0)["results"][0]["action"] == "incomplete"
    assert stack.deliver(w0)["results"][0]["action"] == "incomplete"
    assert stack.deliver(w1)["results"][0]["action"] == "evaluated"
    assert stack.deliver(w0)["results"][0]["action"] == "duplicate"
    records = TornasoleJobs().rule_evaluations("my-job", "VanishingGradient")
    assert [(r["step"], r["fired"]) for r in records] == [(0, True)]
    stack.pump_stream()
    issue = next(e for e in stack.events() if e["detail-type"] == "Tornasole Rule Issue Found")
    assert issue["detail"]["S3Location"]["IndexFiles"] == [
        f"{TRIAL}/index/000000000/000000000000_worker_0.json",
        f"{TRIAL}/index/000000000/000000000000_worker_1.json",
    ]


def test_end_marker_before_the_last_steps_still_completes(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [vg(), vg("Strict", threshold="1e-30")])
    stack.write_collections()
    for step in (0, 5, 10):
        stack.write_step(step, grad=1e-6 if step == 10 else 1.0)
    stack.write_end()
    coll, s0, s5, s10, end = stack.notifications()
    for note in (coll, s0, end):
        stack.deliver(note)
    assert stack.describe()["TrainingJobStatus"] == "InProgress"
    stack.deliver(s10)
    assert stack.describe()["TrainingJobStatus"] == "InProgress"
    stack.deliver(s5)
    d = stack.describe()
    assert d["TrainingJobStatus"] == "Completed"
    assert "TrainingEndTime" in d
    assert statuses() == {"VanishingGradient": "IssuesFound", "Strict": "NoIssuesFound"}


def test_a_raising_rule_is_error_and_the_others_go_on(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [vg(), vg("Broken")])

    def factory(config: Any, trial: Any, step: int) -> Any:
        if config.name == "Broken" and step == 5:
            raise RuntimeError("custom rule failed to import numpyy")
        return default_rule_factory(config, trial, step)

    stack.write_collections()
    for step in (0, 5, 10):
        stack.write_step(step, grad=1e-6 if step == 10 else 1.0)
    stack.write_end()
    svc = evaluator(rule_factory=factory)
    for note in stack.notifications():
        rec = note["Records"][0]["s3"]
        svc.handle_object_created(BUCKET, rec["object"]["key"].replace("%2F", "/"))
    summary = {s["RuleConfigurationName"]: s for s in TornasoleJobs().rule_job_summary("my-job")}
    assert summary["Broken"]["RuleEvaluationStatus"] == "Error"
    assert "RuntimeError: custom rule failed to import numpyy" in summary["Broken"]["StatusDetails"]
    assert summary["VanishingGradient"]["RuleEvaluationStatus"] == "IssuesFound"
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    broken_steps = [r["step"] for r in TornasoleJobs().rule_evaluations("my-job", "Broken")]
    assert broken_steps == [0, 5]  # not evaluated after it errored


def test_stoptraining_action_stops_the_job_through_the_hook(stack: Stack) -> None:
    actions = json.dumps([{"name": "stoptraining"}])
    TornasoleJobs().register_job("my-job", TRIAL, [vg(action_json=actions)])
    stack.write_collections()
    stack.write_step(0)
    stack.write_step(5, grad=1e-6)
    for note in stack.notifications():
        stack.deliver(note)
    stack.pump_stream()
    assert stack.describe()["TrainingJobStatus"] == "Stopping"
    body = (
        client("s3").get_object(Bucket=BUCKET, Key="jobs/my-job/tornasole_stop_training.json")["Body"].read()
    )
    assert json.loads(body)["RuleConfigurationName"] == "VanishingGradient"
    assert json.loads(body)["Step"] == 5
    # the stop signal's own notification is ignored; the hook acknowledges with the end marker
    stack.write_end()
    results = [stack.deliver(n)["results"][0] for n in stack.notifications()]
    assert [r["action"] for r in results] == ["ignored", "completed"]
    stack.pump_stream()
    assert stack.describe()["SecondaryStatus"] == "Stopped"
    ids = event_ids(stack.events())
    assert ids.index("my-job:1:rule/VanishingGradient:IssuesFound") < ids.index("my-job:1:job:Stopping")
    assert ids[-1] == "my-job:1:job:Stopped"


def test_email_and_sms_actions_alert_through_the_topic(stack: Stack) -> None:
    actions = json.dumps(
        [{"name": "email", "endpoint": "ml@example.com"}, {"name": "sms", "endpoint": "+15551234567"}]
    )
    TornasoleJobs().register_job("my-job", TRIAL, [vg(action_json=actions)])
    stack.write_collections()
    stack.write_step(5, grad=1e-6)
    for note in stack.notifications():
        stack.deliver(note)
    stack.pump_stream()
    alerts = stack.alerts()
    attrs = sorted(
        (
            a["MessageAttributes"]["tornasole_action"]["Value"],
            a["MessageAttributes"]["tornasole_endpoint"]["Value"],
        )
        for a in alerts
    )
    assert attrs == [("email", "ml@example.com"), ("sms", "+15551234567")]
    assert "Rule VanishingGradient found issues in training job my-job at step 5" in alerts[0]["Message"]
    assert "index/000000000/000000000005_worker_0.json" in alerts[0]["Message"]


def test_stalled_training_fires_from_the_schedule(stack: Stack) -> None:
    stalled = Rule.sagemaker(
        {"DebugRuleConfiguration": {"RuleConfigurationName": "StalledTrainingRule", "RuleParameters": {}}},
        rule_parameters={"threshold": "60", "stop_training_on_fire": "True"},
    )
    TornasoleJobs().register_job("my-job", TRIAL, [stalled])
    assert evaluator(30).scheduled_check().stalled == 0
    report = evaluator(120).scheduled_check()
    assert report.stalled == 2  # the rule fires, and its stop_training_on_fire stops the job
    assert statuses() == {"StalledTrainingRule": "IssuesFound"}
    assert stack.describe()["TrainingJobStatus"] == "Stopping"
    assert "no new step for 1" in TornasoleJobs().rule_job_summary("my-job")[0]["StatusDetails"]


def test_start_and_end_steps_bound_the_evaluation(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [vg(start_step="5", end_step="15")])
    stack.write_collections()
    for step in (0, 5, 10, 15):
        stack.write_step(step)
    for note in stack.notifications():
        stack.deliver(note)
    assert [r["step"] for r in TornasoleJobs().rule_evaluations("my-job", "VanishingGradient")] == [5, 10]


class SeesHistory(BaseRule):
    """A test rule recording which steps of the trial it can read at each step."""

    seen: dict[int, list[int]] = {}

    def invoke_at_step(self, step: int) -> bool:
        t = self.base_trial.tensor("loss")
        SeesHistory.seen[step] = t.steps()
        return float(np.mean(t.value(step))) > float(np.mean(t.value(min(t.steps()))))


def test_rules_read_a_bounded_window_of_earlier_steps(stack: Stack) -> None:
    TornasoleJobs().register_job(
        "my-job", TRIAL, [Rule.custom("History", source=f"s3://{BUCKET}/rules/h.py")]
    )

    def factory(config: Any, trial: Any, step: int) -> Any:
        return SeesHistory(trial)

    stack.write_collections()
    steps = list(range(0, 70, 5))
    for step in steps:
        stack.write_step(step, loss=5.0 if step == 65 else 1.0)
    svc = evaluator(rule_factory=factory)
    for note in stack.notifications():
        svc.handle_object_created(BUCKET, note["Records"][0]["s3"]["object"]["key"].replace("%2F", "/"))
    assert SeesHistory.seen[10] == [0, 5, 10]
    assert SeesHistory.seen[65] == steps[-11:]  # the step and the 10 before it: never the whole run
    assert statuses() == {"History": "IssuesFound"}

"""Structured logs with job/rule/step keys, the rule's logging level, and reading one rule's log."""

from __future__ import annotations

import json
import logging
import time

import pytest
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from evaluator_stack import TRIAL, Stack

from tornasole.aws.clients import client
from tornasole.jobs import TornasoleJobs
from tornasole.jobs.logs import filter_pattern, rule_log


def test_rule_logs_carry_job_rule_and_step_and_honour_logging_level(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    TornasoleJobs().register_job(
        "my-job",
        TRIAL,
        [
            {"RuleConfigurationName": "Chatty", "RuleParameters": {"rule_to_invoke": "VanishingGradient"}},
            {
                "RuleConfigurationName": "Quiet",
                "RuleParameters": {"rule_to_invoke": "ExplodingTensor", "logging_level": "WARNING"},
            },
        ],
    )
    stack.write_collections()
    stack.write_step(5)
    caplog.set_level(logging.INFO, logger="tornasole")
    for note in stack.notifications():
        stack.deliver(note)
    lines = [(r.name, r.job, r.rule, r.step) for r in caplog.records if getattr(r, "rule", None)]
    assert ("tornasole.rules.VanishingGradient", "my-job", "Chatty", 5) in lines
    assert not [line for line in lines if line[2] == "Quiet"]  # its logging-level is WARNING
    parent = logging.getLogger("tornasole")
    assert any(isinstance(h.formatter, LambdaPowertoolsFormatter) for h in parent.handlers)


def test_one_rules_log_for_one_job_from_cloudwatch(stack: Stack) -> None:
    logs = client("logs")
    group = "/aws/lambda/tornasole-OnObjectCreated"
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="s")
    now = int(time.time() * 1000)
    lines = [
        {"message": "evaluated: fired", "job": "my-job", "rule": "VG", "step": 5},
        {"message": "evaluated: no issue", "job": "my-job", "rule": "Other", "step": 5},
        {"message": "evaluated: no issue", "job": "job-2", "rule": "VG", "step": 5},
    ]
    events = [{"timestamp": now + i, "message": json.dumps(m)} for i, m in enumerate(lines)]
    events.append({"timestamp": now + 10, "message": "START RequestId: 1"})
    logs.put_log_events(logGroupName=group, logStreamName="s", logEvents=events)
    assert list(rule_log("my-job", "VG", group)) == [lines[0]]
    assert [m["rule"] for m in rule_log("my-job", None, group)] == ["VG", "Other"]
    assert filter_pattern("my-job", "VG") == '{ ($.job = "my-job") && ($.rule = "VG") }'

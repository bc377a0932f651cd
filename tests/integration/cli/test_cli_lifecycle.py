"""The CLI's doors to the job life cycle (issue #28): `jobs register --idle-timeout` and
`local sagemaker-event`, against moto."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from moto import mock_aws

from tornasole.aws.clients import client
from tornasole.cli.main import main
from tornasole.local.resources import create_resources


@pytest.fixture
def resources(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    monkeypatch.setenv("TORNASOLE_STATE_TABLE", "tornasole-state")
    with mock_aws():
        yield create_resources("trials")


def _register(*extra: str) -> int:
    return main(
        ["jobs", "register", "--name", "j1", "--s3-output", "s3://trials/j1", "--rule", "DeadRelu", *extra]
    )


def test_idle_timeout_is_stored_on_the_job(resources) -> None:
    from tornasole.evaluator.store.state_table import StateTable

    assert _register("--idle-timeout", "90") == 0
    assert StateTable().load_job("j1").idle_timeout_s == 90


@pytest.mark.parametrize("value", ["0", "-1", "nan", "1e12"])
def test_a_bad_idle_timeout_is_refused_naming_the_parameter(resources, capsys, value: str) -> None:
    assert _register("--idle-timeout", value) == 2
    err = capsys.readouterr().err
    assert "idle_timeout_s must be between 1 and 2592000 seconds" in err
    assert main(["jobs", "status", "j1"]) == 3  # nothing was registered


def test_sagemaker_event_reaches_the_default_bus_rule(resources, capsys) -> None:
    assert main(["local", "sagemaker-event", "j1", "--status", "Failed", "--failure-reason", "OOM"]) == 0
    assert capsys.readouterr().out.startswith("put SageMaker's Failed event for j1 (event ")
    msgs = client("sqs").receive_message(
        QueueUrl=resources.sagemaker_events_queue_url, MaxNumberOfMessages=10
    )
    (event,) = [json.loads(m["Body"]) for m in msgs["Messages"]]
    assert event["source"] == "aws.sagemaker"
    assert event["detail-type"] == "SageMaker Training Job State Change"
    assert event["detail"]["TrainingJobName"] == "j1"
    assert event["detail"]["TrainingJobStatus"] == "Failed"
    assert event["detail"]["FailureReason"] == "OOM"


def test_a_non_terminal_sagemaker_event_is_put_but_not_routed(resources) -> None:
    assert main(["local", "sagemaker-event", "j1", "--status", "InProgress"]) == 0
    msgs = client("sqs").receive_message(QueueUrl=resources.sagemaker_events_queue_url)
    assert "Messages" not in msgs

"""``tornasole jobs ...`` in-process against moto (``mock_aws``): register, list, status, logs, errors."""

from __future__ import annotations

import json
import time

import pytest

from tornasole.cli.main import main


@pytest.fixture
def stack(moto_local_resources: None) -> None:
    """The jobs API's resources in moto (``moto_local_resources``)."""


def test_register_list_status(stack: None, capsys: pytest.CaptureFixture) -> None:
    rc = main(
        [
            "jobs",
            "register",
            "--name",
            "j1",
            "--s3-output",
            "s3://trials/j1",
            "--rule",
            "VanishingGradient:threshold=1e-5",
            "--rule",
            "ExplodingTensor",
            "--action",
            "email:ml@example.com",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "registered j1 (InProgress)" in out
    assert "VanishingGradient  InProgress" in out

    assert main(["jobs", "list"]) == 0
    listing = capsys.readouterr().out
    assert "j1" in listing
    assert "s3://trials/j1" in listing

    assert main(["jobs", "status", "j1", "--json"]) == 0
    desc = json.loads(capsys.readouterr().out)
    params = {r["RuleConfigurationName"]: r["RuleParameters"] for r in desc["DebugRuleConfigurations"]}
    assert params["VanishingGradient"]["threshold"] == "1e-5"
    assert json.loads(params["ExplodingTensor"]["action_json"]) == [
        {"name": "email", "endpoint": "ml@example.com"}
    ]


def test_register_twice_with_other_rules_needs_update(stack: None, capsys: pytest.CaptureFixture) -> None:
    base = ["jobs", "register", "--name", "j2", "--s3-output", "s3://trials/j2"]
    assert main([*base, "--rule", "VanishingGradient"]) == 0
    assert main([*base, "--rule", "VanishingGradient"]) == 0  # idempotent
    assert main([*base, "--rule", "ExplodingTensor"]) == 2
    assert "update" in capsys.readouterr().err
    assert main([*base, "--rule", "ExplodingTensor", "--update"]) == 0
    assert "ExplodingTensor" in capsys.readouterr().out


def test_bad_input_is_one_line(stack: None, capsys: pytest.CaptureFixture) -> None:
    assert main(["jobs", "status", "nope"]) == 3  # not found
    assert "no training job named 'nope'" in capsys.readouterr().err
    assert main(["jobs", "register", "--name", "j3", "--s3-output", "s3://trials/j3", "--update"]) == 2
    assert "--update replaces the rules: give at least one --rule" in capsys.readouterr().err
    assert (
        main(
            [
                "jobs",
                "register",
                "--name",
                "j3",
                "--s3-output",
                "s3://trials/j3",
                "--rule",
                "X",
                "--action",
                "fax",
            ]
        )
        == 2
    )
    assert "stoptraining, email:ADDRESS, sms:NUMBER, or webhook:NAME" in capsys.readouterr().err


def test_register_without_rules_uses_the_recommended_set(stack: None, capsys: pytest.CaptureFixture) -> None:
    from tornasole.jobs import describe, register_job
    from tornasole.rules import recommended_rules

    names = [r["RuleConfigurationName"] for r in recommended_rules()]
    assert (
        main(
            ["jobs", "register", "--name", "j4", "--s3-output", "s3://trials/j4", "--action", "stoptraining"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "no --rule given: registering the recommended rules: " + ", ".join(names) in out
    desc = describe("j4")
    assert [r["RuleConfigurationName"] for r in desc["DebugRuleConfigurations"]] == names
    by_name = {r["RuleConfigurationName"]: r["RuleParameters"] for r in desc["DebugRuleConfigurations"]}
    assert by_name["DeadRelu"]["threshold_layer"] == "90"
    assert all(json.loads(p["action_json"]) == [{"name": "stoptraining"}] for p in by_name.values())

    register_job("j5", "s3://trials/j5")  # the library: same default, same configurations
    assert describe("j5")["DebugRuleConfigurations"] == [
        {**r, "RuleParameters": {k: v for k, v in r["RuleParameters"].items() if k != "action_json"}}
        for r in desc["DebugRuleConfigurations"]
    ]
    with pytest.raises(Exception, match="at least one rule"):
        register_job("j6", "s3://trials/j6", [])  # an explicit empty list is still a mistake


def test_custom_rule_file_is_uploaded_next_to_the_output(stack: None, tmp_path, capsys) -> None:
    rule = tmp_path / "my_rule.py"
    rule.write_text(
        "from smdebug.rules import Rule\n\n"
        "class Always(Rule):\n"
        "    def __init__(self, base_trial, threshold='1'):\n"
        "        super().__init__(base_trial)\n"
        "    def invoke_at_step(self, step):\n"
        "        return True\n"
    )
    rc = main(
        [
            "jobs",
            "register",
            "--name",
            "j4",
            "--s3-output",
            "s3://trials/j4",
            "--rule-file",
            str(rule),
            "--rule-class",
            "Always",
            "--rule-param",
            "threshold=2",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    from tornasole.aws.clients import s3_client

    body = s3_client().get_object(Bucket="trials", Key="j4/tornasole_rules/my_rule.py")["Body"].read()
    assert b"class Always" in body


def test_logs_from_cloudwatch_filtered_by_job_and_rule(stack: None, capsys: pytest.CaptureFixture) -> None:
    from tornasole.aws.clients import client

    logs = client("logs")
    logs.create_log_group(logGroupName="/aws/lambda/eval")
    logs.create_log_stream(logGroupName="/aws/lambda/eval", logStreamName="s")
    lines = [
        {
            "level": "INFO",
            "message": "rule evaluated",
            "job": "j5",
            "rule": "A",
            "step": 3,
            "timestamp": "t1",
        },
        {
            "level": "INFO",
            "message": "rule evaluated",
            "job": "j5",
            "rule": "B",
            "step": 3,
            "timestamp": "t2",
        },
        {
            "level": "INFO",
            "message": "rule evaluated",
            "job": "other",
            "rule": "A",
            "step": 3,
            "timestamp": "t3",
        },
    ]
    logs.put_log_events(
        logGroupName="/aws/lambda/eval",
        logStreamName="s",
        logEvents=[  # recent timestamps: CloudWatch drops events older than 14 days
            {"timestamp": int(time.time() * 1000) + i, "message": json.dumps(x)} for i, x in enumerate(lines)
        ],
    )
    assert main(["jobs", "logs", "j5", "--rule", "A", "--log-group", "/aws/lambda/eval"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["t1 INFO rule=A step=3 rule evaluated"]

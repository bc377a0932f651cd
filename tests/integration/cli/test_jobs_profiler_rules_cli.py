"""``tornasole jobs register --profiler-rule`` and the profiler rules through ``--update``, in-process
against moto (``mock_aws``).

The entries sent are the SDK's ``ProfilerRule.sagemaker(...)`` payload (compare
``tests/fixtures/sagemaker_requests/profiler_rules_and_config.json``): ``RuleConfigurationName`` and
``RuleParameters`` with ``rule_to_invoke`` and every parameter as a string.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tornasole.cli.main import main

BASE = ["jobs", "register", "--name", "j1", "--s3-output", "s3://trials/j1"]
VG = {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"rule_to_invoke": "VanishingGradient"}}


@pytest.fixture
def stack(moto_local_resources: None) -> None:
    """The jobs API's resources in moto (``moto_local_resources``)."""


def _status(capsys: pytest.CaptureFixture, name: str = "j1") -> dict[str, Any]:
    capsys.readouterr()
    assert main(["jobs", "status", name, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _names(desc: dict[str, Any], field: str) -> list[str]:
    return [r["RuleConfigurationName"] for r in desc.get(field) or []]


def test_profiler_rules_register_as_the_sdk_s_payload(stack: None, capsys: pytest.CaptureFixture) -> None:
    rc = main(
        [
            *BASE,
            "--rule",
            "VanishingGradient",
            "--profiler-rule",
            "LowGPUUtilization:threshold_p95=60,window=200",
            "--profiler-rule",
            "CPUBottleneck",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    desc = _status(capsys)
    assert _names(desc, "DebugRuleConfigurations") == ["VanishingGradient"]
    profiler = {r["RuleConfigurationName"]: r["RuleParameters"] for r in desc["ProfilerRuleConfigurations"]}
    assert profiler["LowGPUUtilization"]["rule_to_invoke"] == "LowGPUUtilization"
    assert (profiler["LowGPUUtilization"]["threshold_p95"], profiler["LowGPUUtilization"]["window"]) == (
        "60",
        "200",
    )
    assert profiler["CPUBottleneck"]["rule_to_invoke"] == "CPUBottleneck"
    assert _names(desc, "ProfilerRuleEvaluationStatuses") == ["LowGPUUtilization", "CPUBottleneck"]


def test_profiler_rules_alone_do_not_add_the_recommended_set(
    stack: None, capsys: pytest.CaptureFixture
) -> None:
    assert main([*BASE, "--profiler-rule", "StepOutlier"]) == 0
    assert "recommended" not in capsys.readouterr().out
    desc = _status(capsys)
    assert _names(desc, "DebugRuleConfigurations") == []
    assert _names(desc, "ProfilerRuleConfigurations") == ["StepOutlier"]


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("LowGPUUtilisation", "LowGPUUtilization"),  # a misspelt name: the right one is suggested
        ("CPUBottleneck:no_such_parameter=1", "no_such_parameter"),
        ("CPUBottleneck:threshold", "'threshold' is not key=value"),
    ],
)
def test_a_bad_profiler_rule_is_an_invalid_input_naming_it(
    stack: None, capsys: pytest.CaptureFixture, spec: str, words: str
) -> None:
    assert main([*BASE, "--rule", "VanishingGradient", "--profiler-rule", spec]) == 2
    assert words in capsys.readouterr().err
    assert main(["jobs", "status", "j1"]) == 3  # nothing was registered


def test_update_keeps_the_kind_of_rules_it_does_not_name(stack: None, capsys: pytest.CaptureFixture) -> None:
    assert main([*BASE, "--rule", "VanishingGradient", "--profiler-rule", "CPUBottleneck"]) == 0
    # tensor rules only: the profiler rule stays (it was dropped before)
    assert main([*BASE, "--update", "--rule", "ExplodingTensor"]) == 0
    desc = _status(capsys)
    assert _names(desc, "DebugRuleConfigurations") == ["ExplodingTensor"]
    assert _names(desc, "ProfilerRuleConfigurations") == ["CPUBottleneck"]
    # profiler rules only: they are replaced, the tensor rules stay
    assert main([*BASE, "--update", "--profiler-rule", "StepOutlier:n_outliers=5"]) == 0
    desc = _status(capsys)
    assert _names(desc, "DebugRuleConfigurations") == ["ExplodingTensor"]
    assert _names(desc, "ProfilerRuleConfigurations") == ["StepOutlier"]
    assert desc["ProfilerRuleConfigurations"][0]["RuleParameters"]["n_outliers"] == "5"


def test_from_request_refuses_profiler_rule_options(stack: None, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["jobs", "register", "--from-request", "r.json", "--profiler-rule", "CPUBottleneck"])
    assert exit_.value.code == 2
    assert "--profiler-rule" in capsys.readouterr().err

"""``update_job_rules``: the tensor and the profiler rules are two sets, each replaced only when named,
against moto (``mock_aws``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tornasole.evaluator.registration.job_config import from_debug_rule_configuration
from tornasole.exceptions import InvalidJobConfiguration
from tornasole.jobs import TornasoleJobs, update_job_rules

VG = {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"rule_to_invoke": "VanishingGradient"}}


@pytest.fixture
def stack(moto_local_resources: None) -> None:
    """The jobs API's resources in moto (``moto_local_resources``)."""


def _names(desc: dict[str, Any], field: str) -> list[str]:
    return [r["RuleConfigurationName"] for r in desc.get(field) or []]


CPU = {"RuleConfigurationName": "CPUBottleneck", "RuleParameters": {"rule_to_invoke": "CPUBottleneck"}}


def test_an_update_naming_tensor_rules_only_keeps_the_profiler_rules(stack: None) -> None:
    """The data loss this fixes: a job registered with profiler rules (here from its job file) lost
    them to ``update_job_rules(name, tensor_rules)``, the only call that could change its rules."""
    config = {"TrainingJobName": "j1", "DebugRuleConfigurations": [VG], "ProfilerRuleConfigurations": [CPU]}
    TornasoleJobs().register_from_config(config, "s3://trials/j1")
    d = update_job_rules("j1", [VG])
    assert _names(d, "ProfilerRuleConfigurations") == ["CPUBottleneck"]
    assert [s["RuleEvaluationStatus"] for s in d["ProfilerRuleEvaluationStatuses"]] == ["InProgress"]


def test_update_job_rules_replaces_a_set_it_names(stack: None) -> None:
    TornasoleJobs().register_job("j1", "s3://trials/j1", [VG], profiler_rules=[CPU])
    d = update_job_rules("j1", None, profiler_rules=[])  # an empty list empties that set
    assert _names(d, "ProfilerRuleConfigurations") == []
    assert _names(d, "DebugRuleConfigurations") == ["VanishingGradient"]
    with pytest.raises(InvalidJobConfiguration, match="unique across debug and profiler"):
        update_job_rules(
            "j1", None, profiler_rules=[{**VG, "RuleParameters": {"rule_to_invoke": "CPUBottleneck"}}]
        )
    # RuleConfig(..., profiler=True) in the rules list still names the profiler rules
    d = update_job_rules("j1", [VG, dataclasses.replace(from_debug_rule_configuration(CPU), profiler=True)])
    assert _names(d, "ProfilerRuleConfigurations") == ["CPUBottleneck"]
    assert _names(d, "DebugRuleConfigurations") == ["VanishingGradient"]
    with pytest.raises(InvalidJobConfiguration, match="no rule left"):
        update_job_rules("j1", [], profiler_rules=[])
    with pytest.raises(InvalidJobConfiguration, match="names the debug rules, the profiler rules or both"):
        update_job_rules("j1", None)

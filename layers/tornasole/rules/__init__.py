"""Rules: check a trial step by step and say what is wrong with a training run.

Examples
--------
>>> from tornasole.rules import Rule, invoke_rule
>>> from tornasole.rules.generic import VanishingGradient
>>> # summary = invoke_rule(VanishingGradient(trial, threshold="0.0001"), start_step=0, end_step=None)
"""

from __future__ import annotations

from tornasole.rules.actions import Action, parse_actions
from tornasole.rules.invoker import InvokeSummary, RuleInvocationError, invoke_rule
from tornasole.rules.loader import create_custom_rule, load_rule_class
from tornasole.rules.params import Param, parse_params
from tornasole.rules.recommended import recommended_rules, recommended_rules_that_cannot_apply
from tornasole.rules.registry import create_rule, get_rule, rule_names
from tornasole.rules.report import RuleOutcome
from tornasole.rules.req_tensors import RequiredTensors, RequiredTensorsForTrial
from tornasole.rules.rule import Rule

__all__ = [
    "Action",
    "InvokeSummary",
    "Param",
    "RequiredTensors",
    "RequiredTensorsForTrial",
    "Rule",
    "RuleInvocationError",
    "RuleOutcome",
    "create_custom_rule",
    "create_rule",
    "get_rule",
    "invoke_rule",
    "load_rule_class",
    "parse_actions",
    "parse_params",
    "recommended_rules",
    "recommended_rules_that_cannot_apply",
    "rule_names",
]

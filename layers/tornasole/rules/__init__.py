"""Rules: check a trial step by step and say what is wrong with a training run.

The API a rule is written against (``Rule``, ``req_tensors``, ``params``, ``actions``, ``loader``,
``registry``, ``invoke_rule``, ``outcome``, ``verdict``, ``inputs``) lives here; the built-in rules
and the recommended set in :mod:`tornasole.rules.builtin`. ``tornasole.rules.rule_configs`` and
``tornasole.rules.recommended`` are old paths of ``tornasole.jobs.rule_configs`` and
``tornasole.rules.builtin.recommended``.

Floor plan: imported by the evaluator, jobs, compat, cli and demo; imports trials, format, storage,
analysis and below, never evaluator, jobs or local (cli only as smdebug's ``rule_invoker`` path).

Examples
--------
>>> from tornasole.rules import Rule, invoke_rule
>>> from tornasole.rules.generic import VanishingGradient
>>> # summary = invoke_rule(VanishingGradient(trial, threshold="0.0001"), start_step=0, end_step=None)
"""

from __future__ import annotations

from tornasole.moved_modules import alias_module
from tornasole.rules.actions import Action, parse_actions
from tornasole.rules.builtin.recommended import (
    opt_in_rules,
    recommended_rules,
    recommended_rules_that_cannot_apply,
)
from tornasole.rules.loader import create_custom_rule, load_rule_class
from tornasole.rules.outcome import RuleOutcome
from tornasole.rules.params import Param, parse_params
from tornasole.rules.registry import create_rule, get_rule, rule_names
from tornasole.rules.req_tensors import RequiredTensors, RequiredTensorsForTrial
from tornasole.rules.rule import Rule
from tornasole.rules.step_loop import InvokeSummary, RuleInvocationError, invoke_rule

# the README's ``from tornasole.rules import rule_configs`` and smdebug users' module paths
alias_module("tornasole.rules.rule_configs", "tornasole.jobs.rule_configs")
alias_module("tornasole.rules.recommended", "tornasole.rules.builtin.recommended")

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
    "opt_in_rules",
    "recommended_rules",
    "recommended_rules_that_cannot_apply",
    "rule_names",
]

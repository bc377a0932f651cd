"""The evaluator and the offline ``invoke_rule`` give one trial the same verdict (one logic, shared).

Before: a rule whose tensors matched nothing ended ``Error: NothingEvaluated`` in the evaluator and
``NoIssuesFound`` with ``steps_evaluated`` equal to every step offline; the same trial, two answers.
"""

from __future__ import annotations

from evaluator_stack import TRIAL, Stack
from test_completion import deliver_all, summary

from tornasole.jobs import TornasoleJobs
from tornasole.rules import create_rule, invoke_rule
from tornasole.rules.verdict import verdict_of_status
from tornasole.trials import create_trial

RULES = [
    {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"threshold": "0.001"}},
    {
        "RuleConfigurationName": "NoMatch",
        "RuleParameters": {"rule_to_invoke": "AllZero", "tensor_regex": "x/.*"},
    },
    {
        "RuleConfigurationName": "NoCollection",
        "RuleParameters": {"rule_to_invoke": "AllZero", "collection_names": "relu_output"},
    },
    {"RuleConfigurationName": "DeadRelu", "RuleParameters": {}},
    {"RuleConfigurationName": "ExplodingTensor", "RuleParameters": {}},
]


def test_the_evaluator_and_invoke_rule_agree_on_every_rule(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, RULES)
    stack.write_collections()
    for step in range(3):
        stack.write_step(step, grad=1e-9 if step == 2 else 1.0)
    stack.write_end()
    deliver_all(stack, stack.notifications())
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    online = {name: verdict_of_status(*got) for name, got in summary().items()}
    offline = {}
    for conf in RULES:
        params = dict(conf["RuleParameters"])
        target = params.pop("rule_to_invoke", conf["RuleConfigurationName"])
        rule = create_rule(target, create_trial(TRIAL), **params)
        offline[conf["RuleConfigurationName"]] = invoke_rule(rule).status
    assert (
        online
        == offline
        == {
            "VanishingGradient": "IssuesFound",
            "NoMatch": "NothingEvaluated",
            "NoCollection": "NothingEvaluated",
            "DeadRelu": "NothingEvaluated",
            "ExplodingTensor": "NoIssuesFound",
        }
    )
    got = summary()
    assert got["DeadRelu"][0] == "NoIssuesFound"  # SageMaker's six values: a subscriber sees no issue
    assert got["DeadRelu"][1].startswith(
        "NothingEvaluated: DeadRelu evaluated 0 of 3 steps: it reads ReLU outputs"
    )

"""The rule sandbox in the synthesized template: each role's exact actions and resources.

The sandbox function's role holds its log group only; the reader role is assumable by the two
evaluating functions' roles only and reads the trial and rule prefixes only; the evaluating roles
may assume that one role and invoke that one function, and the publisher neither.
"""

from __future__ import annotations

from typing import Any

from tornasole.stack_spec import DEFAULT_SPEC, ENV_CUSTOM_RULE_FUNCTION, ENV_CUSTOM_RULE_READER_ROLE

EVALUATING = (DEFAULT_SPEC.on_object_created.description, DEFAULT_SPEC.scheduled_check.description)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _function(synth: Any, description: str) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (lid, r["Properties"])
        for lid, r in synth.resources("AWS::Lambda::Function").items()
        if r["Properties"].get("Description") == description
    ]
    return found


def _role_statements(synth: Any, role: str) -> list[dict[str, Any]]:
    return [
        st
        for r in synth.resources("AWS::IAM::Policy").values()
        if {"Ref": role} in r["Properties"]["Roles"]
        for st in r["Properties"]["PolicyDocument"]["Statement"]
    ]


def _lid(synth: Any, construct: Any) -> str:
    return synth.stack.get_logical_id(construct.node.default_child)


def test_the_sandbox_functions_role_holds_its_log_group_and_nothing_else(synth) -> None:
    """Its log group, and the network-interface actions Lambda needs to put it in its VPC (no data)."""
    from infra.constructs.rule_sandbox import _ENI_ACTIONS

    _, props = _function(synth, DEFAULT_SPEC.custom_rule.description)
    role = props["Role"]["Fn::GetAtt"][0]
    statements = _role_statements(synth, role)
    eni = [st for st in statements if st["Resource"] == "*"]
    assert [sorted(_as_list(st["Action"])) for st in eni] == [sorted(_ENI_ACTIONS)]
    statements = [st for st in statements if st not in eni]
    assert {a for st in statements for a in _as_list(st["Action"])} == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
    }
    log_group = props["LoggingConfig"]["LogGroup"]["Ref"]
    for st in statements:
        assert st["Resource"] == {"Fn::GetAtt": [log_group, "Arn"]}
    assert not synth.json["Resources"][role]["Properties"].get("ManagedPolicyArns")


def test_the_sandbox_function_gets_the_rule_prefix_and_no_table_bus_or_topic(synth) -> None:
    _, props = _function(synth, DEFAULT_SPEC.custom_rule.description)
    env = props["Environment"]["Variables"]
    assert set(env) == {
        "TORNASOLE_TRIAL_BUCKET",
        "TORNASOLE_TRIAL_PREFIX",
        "TORNASOLE_CUSTOM_RULES_PREFIX",
        "POWERTOOLS_SERVICE_NAME",
    }
    assert props["Timeout"] == DEFAULT_SPEC.custom_rule.timeout_s
    _, evaluator = _function(synth, DEFAULT_SPEC.on_object_created.description)
    assert props["Layers"] == evaluator["Layers"]
    assert props["Runtime"] == evaluator["Runtime"]


def test_the_reader_role_is_assumable_by_the_evaluating_roles_only(synth) -> None:
    reader = _lid(synth, synth.stack.rule_sandbox.reader)
    trust = synth.json["Resources"][reader]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    principals = [p for st in trust for p in _as_list(st["Principal"]["AWS"])]
    roles = sorted(_function(synth, d)[1]["Role"]["Fn::GetAtt"][0] for d in EVALUATING)
    assert sorted(p["Fn::GetAtt"][0] for p in principals) == roles
    assert {a for st in trust for a in _as_list(st["Action"])} == {"sts:AssumeRole"}


def test_the_reader_role_reads_the_trial_and_rule_prefixes_only(synth) -> None:
    reader = _lid(synth, synth.stack.rule_sandbox.reader)
    statements = _role_statements(synth, reader)
    by_action = {st["Action"]: st for st in statements}
    assert set(by_action) == {"s3:GetObject", "s3:ListBucket"}
    reads = [r["Fn::Join"][1][-1] for r in by_action["s3:GetObject"]["Resource"]]
    assert sorted(reads) == ["/custom-rules/*", "/trials/*"]
    assert by_action["s3:ListBucket"]["Condition"] == {"StringLike": {"s3:prefix": ["trials/*"]}}


def test_the_evaluating_roles_may_assume_the_reader_and_invoke_the_sandbox_only(synth) -> None:
    reader = _lid(synth, synth.stack.rule_sandbox.reader)
    sandbox = _lid(synth, synth.stack.rule_sandbox.function)
    for description in EVALUATING:
        lid, props = _function(synth, description)
        statements = _role_statements(synth, props["Role"]["Fn::GetAtt"][0])
        sts = [st for st in statements if "sts:AssumeRole" in _as_list(st["Action"])]
        invoke = [st for st in statements if any(a.startswith("lambda:") for a in _as_list(st["Action"]))]
        assert [(st["Action"], st["Resource"]) for st in sts] == [
            ("sts:AssumeRole", {"Fn::GetAtt": [reader, "Arn"]})
        ]
        assert [(st["Action"], st["Resource"]) for st in invoke] == [
            ("lambda:InvokeFunction", {"Fn::GetAtt": [sandbox, "Arn"]})
        ]
        env = props["Environment"]["Variables"]
        assert env[ENV_CUSTOM_RULE_FUNCTION] == {"Ref": sandbox}, lid
        assert env[ENV_CUSTOM_RULE_READER_ROLE] == {"Fn::GetAtt": [reader, "Arn"]}, lid
    _, publish = _function(synth, DEFAULT_SPEC.publish_events.description)
    actions = {
        a for st in _role_statements(synth, publish["Role"]["Fn::GetAtt"][0]) for a in _as_list(st["Action"])
    }
    assert not {"sts:AssumeRole", "lambda:InvokeFunction"} & actions
    assert ENV_CUSTOM_RULE_FUNCTION not in publish["Environment"]["Variables"]


def test_no_evaluating_role_reads_rule_code_any_more(synth) -> None:
    for description in EVALUATING:
        _, props = _function(synth, description)
        for st in _role_statements(synth, props["Role"]["Fn::GetAtt"][0]):
            if "s3:GetObject" in _as_list(st["Action"]):
                assert [r["Fn::Join"][1][-1] for r in _as_list(st["Resource"])] == ["/trials/*"]

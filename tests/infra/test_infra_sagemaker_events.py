"""SageMaker's own "Training Job State Change" events reach the sagemaker_state_change function (issue #28).

On SageMaker the hook writes no end marker, so the stack listens on the account's *default* bus (where
SageMaker puts its events), for SageMaker's source and detail-type exactly and terminal statuses only.
"""

from __future__ import annotations

from aws_cdk.assertions import Match

from tornasole.stack_spec import DEFAULT_SPEC, SAGEMAKER_END_EVENT_PATTERN


def _function(synth, description: str) -> str:
    (lid,) = [
        lid
        for lid, res in synth.resources("AWS::Lambda::Function").items()
        if res["Properties"].get("Description") == description
    ]
    return lid


def test_rule_on_the_default_bus_matches_sagemakers_end_events_only(synth) -> None:
    fn = _function(synth, DEFAULT_SPEC.sagemaker_state_change.description)
    rules = [
        res["Properties"]
        for res in synth.resources("AWS::Events::Rule").values()
        if res["Properties"].get("EventPattern", {}).get("source") == ["aws.sagemaker"]
    ]
    assert len(rules) == 1
    (rule,) = rules
    assert "EventBusName" not in rule  # the default bus: where SageMaker's events are
    assert rule["EventPattern"] == {
        "source": ["aws.sagemaker"],
        "detail-type": ["SageMaker Training Job State Change"],
        "detail": {"TrainingJobStatus": ["Completed", "Failed", "Stopped"]},
    }
    assert rule["EventPattern"] == SAGEMAKER_END_EVENT_PATTERN
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [fn, "Arn"]}
    assert "DeadLetterConfig" in target
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 2}


def test_only_that_rule_may_invoke_the_function(synth) -> None:
    fn = _function(synth, DEFAULT_SPEC.sagemaker_state_change.description)
    synth.template.has_resource_properties(
        "AWS::Lambda::Permission",
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": {"Fn::GetAtt": [fn, "Arn"]},
            "Principal": "events.amazonaws.com",
            "SourceArn": Match.object_like({"Fn::GetAtt": Match.any_value()}),
        },
    )
    permissions = [
        res["Properties"]
        for res in synth.resources("AWS::Lambda::Permission").values()
        if res["Properties"].get("FunctionName") == {"Fn::GetAtt": [fn, "Arn"]}
    ]
    assert len(permissions) == 1

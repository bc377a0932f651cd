"""The synthesized template does what the stack promises (behaviour, not logical IDs)."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Capture, Match

from tornasole.stack_spec import DEFAULT_SPEC, DETAIL_TYPE_JOB_STATE_CHANGE, END_MARKER_FILE


def _function_named(synth, asset_fragment: str) -> tuple[str, dict[str, Any]]:
    """The logical id and properties of our function whose description/handler asset matches."""
    for logical_id, res in synth.resources("AWS::Lambda::Function").items():
        if asset_fragment in res["Properties"].get("Description", ""):
            return logical_id, res["Properties"]
    raise AssertionError(f"no function described with {asset_fragment!r}")


def _ours(synth) -> dict[str, dict[str, Any]]:
    """Our three functions (not CDK's notification handler), keyed by logical id."""
    return {
        lid: res["Properties"]
        for lid, res in synth.resources("AWS::Lambda::Function").items()
        if res["Properties"].get("Runtime") == "python3.12"
    }


def test_bucket_blocks_public_access_encrypts_and_refuses_plain_http(synth) -> None:
    synth.template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                ]
            },
            "LifecycleConfiguration": {
                "Rules": Match.array_with(
                    [Match.object_like({"Prefix": "trials/", "ExpirationInDays": 30, "Status": "Enabled"})]
                )
            },
        },
    )
    synth.template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Action": "s3:*",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        )
                    ]
                )
            }
        },
    )


def test_notifications_filter_step_files_under_the_trial_prefix_to_on_object_created(synth) -> None:
    target = Capture()
    synth.template.has_resource_properties(
        "Custom::S3BucketNotifications",
        {
            "NotificationConfiguration": {
                "LambdaFunctionConfigurations": [
                    {
                        "Events": ["s3:ObjectCreated:*"],
                        "Filter": {
                            "Key": {
                                "FilterRules": [
                                    {"Name": "suffix", "Value": ".json"},
                                    {"Name": "prefix", "Value": "trials/"},
                                ]
                            }
                        },
                        "LambdaFunctionArn": {"Fn::GetAtt": [target, "Arn"]},
                    },
                    {
                        "Events": ["s3:ObjectCreated:*"],
                        "Filter": {
                            "Key": {
                                "FilterRules": [
                                    {"Name": "suffix", "Value": END_MARKER_FILE},
                                    {"Name": "prefix", "Value": "trials/"},
                                ]
                            }
                        },
                        "LambdaFunctionArn": Match.any_value(),
                    },
                ]
            }
        },
    )
    on_created, _ = _function_named(synth, "S3 ObjectCreated")
    assert target.as_string() == on_created


def test_state_table_is_on_demand_with_pitr_ttl_stream_and_the_spec_keys(synth) -> None:
    spec = DEFAULT_SPEC.table
    synth.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "TableName": spec.name,
            "KeySchema": [
                {"AttributeName": spec.partition_key, "KeyType": "HASH"},
                {"AttributeName": spec.sort_key, "KeyType": "RANGE"},
            ],
            "BillingMode": "PAY_PER_REQUEST",
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "TimeToLiveSpecification": {"AttributeName": spec.ttl_attribute, "Enabled": True},
            "StreamSpecification": {"StreamViewType": "NEW_IMAGE"},
            "GlobalSecondaryIndexes": [
                Match.object_like(
                    {
                        "IndexName": spec.gsi.name,
                        "KeySchema": [
                            {"AttributeName": spec.gsi.partition_key, "KeyType": "HASH"},
                            {"AttributeName": spec.gsi.sort_key, "KeyType": "RANGE"},
                        ],
                    }
                )
            ],
        },
    )


def test_functions_share_the_layer_and_carry_the_resource_names(synth) -> None:
    functions = {
        lid: p for lid, p in _ours(synth).items() if p["Description"] != DEFAULT_SPEC.custom_rule.description
    }
    # on_object_created, publish_events, scheduled_check, sagemaker_state_change (+ the rule sandbox)
    assert len(functions) == 4
    bus_name = synth.json["Resources"]
    for props in functions.values():
        assert props["Handler"] == "handler.handler"
        assert props["Architectures"] == ["x86_64"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert len(props["Layers"]) == 1
        env = props["Environment"]["Variables"]
        assert env["TORNASOLE_EVENT_BUS"]["Ref"] in bus_name
        assert synth.json["Resources"][env["TORNASOLE_EVENT_BUS"]["Ref"]]["Type"] == "AWS::Events::EventBus"
        assert synth.json["Resources"][env["TORNASOLE_STATE_TABLE"]["Ref"]]["Type"] == "AWS::DynamoDB::Table"
        assert synth.json["Resources"][env["TORNASOLE_TRIAL_BUCKET"]["Ref"]]["Type"] == "AWS::S3::Bucket"
        assert synth.json["Resources"][env["TORNASOLE_ALERT_TOPIC_ARN"]["Ref"]]["Type"] == "AWS::SNS::Topic"
        assert env["TORNASOLE_EVENT_SOURCE"] == "tornasole"
        assert env["TORNASOLE_TRIAL_PREFIX"] == "trials/"
        assert env["POWERTOOLS_SERVICE_NAME"] == DEFAULT_SPEC.service_name
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == DEFAULT_SPEC.metrics_namespace
    _, on_created = _function_named(synth, "S3 ObjectCreated")
    assert on_created["MemorySize"] == 2048
    assert on_created["ReservedConcurrentExecutions"] == 20
    _, publish = _function_named(synth, "DynamoDB stream")
    assert publish["MemorySize"] == DEFAULT_SPEC.publish_events.memory_mb


def test_async_failures_go_to_the_failure_queue(synth) -> None:
    queue = Capture()
    synth.template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {"DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": [queue, "Arn"]}}}},
    )
    assert synth.json["Resources"][queue.as_string()]["Type"] == "AWS::SQS::Queue"
    invoked = {
        c["Properties"]["FunctionName"]["Ref"]
        for c in synth.resources("AWS::Lambda::EventInvokeConfig").values()
    }
    assert _function_named(synth, "S3 ObjectCreated")[0] in invoked
    assert _function_named(synth, "Schedule:")[0] in invoked


def test_outbox_stream_is_bisected_retried_and_parked_on_failure(synth) -> None:
    publish, _ = _function_named(synth, "DynamoDB stream")
    synth.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "FunctionName": {"Ref": publish},
            "EventSourceArn": {"Fn::GetAtt": [Match.any_value(), "StreamArn"]},
            "StartingPosition": "TRIM_HORIZON",
            "BisectBatchOnFunctionError": True,
            "MaximumRetryAttempts": DEFAULT_SPEC.stream_retry_attempts,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "DestinationConfig": {"OnFailure": {"Destination": Match.any_value()}},
            "FilterCriteria": {"Filters": [{"Pattern": DEFAULT_SPEC.stream_filter_pattern}]},
        },
    )


def test_schedule_invokes_scheduled_check(synth) -> None:
    scheduled, _ = _function_named(synth, "Schedule:")
    synth.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": DEFAULT_SPEC.schedule_expression,
            "Targets": [
                Match.object_like(
                    {"Arn": {"Fn::GetAtt": [scheduled, "Arn"]}, "DeadLetterConfig": Match.any_value()}
                )
            ],
        },
    )


def test_issues_rule_on_our_bus_sends_a_readable_message_to_the_status_topic(synth) -> None:
    bus, topic, template = Capture(), Capture(), Capture()
    synth.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventBusName": {"Ref": bus},
            "EventPattern": {
                "source": ["tornasole"],
                "detail-type": [DETAIL_TYPE_JOB_STATE_CHANGE],
                "detail": {"DebugRuleEvaluationStatuses": {"RuleEvaluationStatus": ["IssuesFound", "Error"]}},
            },
            "Targets": [
                Match.object_like(
                    {
                        "Arn": {"Ref": topic},
                        "InputTransformer": Match.object_like({"InputTemplate": template}),
                        "DeadLetterConfig": Match.any_value(),
                    }
                )
            ],
        },
    )
    resources = synth.json["Resources"]
    assert resources[bus.as_string()]["Properties"]["Name"] == DEFAULT_SPEC.bus.name
    assert resources[topic.as_string()]["Type"] == "AWS::SNS::Topic"
    assert "<detail-TrainingJobName>" in template.as_string()


def test_user_lambda_gets_the_same_transitions_when_given(synth) -> None:
    arn = "arn:aws:lambda:us-east-1:123456789012:function:my-alarm-handler"
    synth.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": Match.object_like({"detail-type": [DETAIL_TYPE_JOB_STATE_CHANGE]}),
            "Targets": [Match.object_like({"Arn": arn})],
        },
    )
    synth.template.has_resource_properties(
        "AWS::Lambda::Permission", {"FunctionName": arn, "Principal": "events.amazonaws.com"}
    )


def test_email_subscriptions_filter_actions_by_address(synth) -> None:
    spec = DEFAULT_SPEC.alerts
    for address in ("ops@example.com", "ml@example.com"):
        synth.template.has_resource_properties(
            "AWS::SNS::Subscription",
            {
                "Protocol": "email",
                "Endpoint": address,
                "FilterPolicy": {spec.attr_action: ["email"], spec.attr_endpoint: [address]},
            },
        )
    synth.template.has_resource_properties("AWS::SNS::Topic", {"TopicName": spec.topic_name})


def test_alarms_watch_every_function_and_the_failure_queue(synth) -> None:
    alarms = synth.resources("AWS::CloudWatch::Alarm").values()
    watched = {
        d["Value"]["Ref"]
        for a in alarms
        for d in a["Properties"].get("Dimensions", [])
        if d["Name"] in ("FunctionName", "QueueName") and isinstance(d["Value"], dict) and "Ref" in d["Value"]
    }
    assert set(_ours(synth)) <= watched
    assert all(a["Properties"]["AlarmActions"] for a in alarms)
    synth.template.has_resource_properties("AWS::CloudWatch::Alarm", {"MetricName": "IteratorAge"})
    synth.template.has_resource_properties(
        "AWS::CloudWatch::Alarm", {"MetricName": "ApproximateNumberOfMessagesVisible"}
    )


def test_log_groups_have_the_configured_retention(synth) -> None:
    groups = synth.resources("AWS::Logs::LogGroup").values()
    assert len(groups) == 6  # the four functions', the rule sandbox's and its VPC's rejected flows
    assert {g["Properties"]["RetentionInDays"] for g in groups} == {30}


def test_outputs_include_the_register_command(synth) -> None:
    outputs = synth.json["Outputs"]
    for key in ("BucketName", "TrialPrefix", "EventBusName", "AlertTopicArn", "StateTableName"):
        assert key in outputs
    command = outputs["RegisterJobCommand"]["Value"]
    rendered = "".join(p if isinstance(p, str) else "<ref>" for p in command["Fn::Join"][1])
    assert "tornasole jobs register --name my-job --s3-output s3://<ref>/trials/my-job" in rendered
    assert "TORNASOLE_STATE_TABLE=" in rendered


def test_imported_bucket_arm64_variant(imported) -> None:
    assert not imported.resources("AWS::S3::Bucket")
    imported.template.has_resource_properties(
        "Custom::S3BucketNotifications",
        {
            "BucketName": "my-training-output",
            "NotificationConfiguration": {
                "LambdaFunctionConfigurations": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Filter": {
                                    "Key": {
                                        "FilterRules": [
                                            {"Name": "suffix", "Value": ".json"},
                                            {"Name": "prefix", "Value": "debug/"},
                                        ]
                                    }
                                }
                            }
                        )
                    ]
                ),
            },
        },
    )
    for props in _ours(imported).values():
        assert props["Architectures"] == ["arm64"]
        assert props["Environment"]["Variables"]["TORNASOLE_CUSTOM_RULES_PREFIX"]  # token or string
    imported.template.has_resource_properties(
        "AWS::Lambda::LayerVersion",
        {"CompatibleArchitectures": ["arm64"], "CompatibleRuntimes": ["python3.12"]},
    )
    imported.template.has_resource_properties("AWS::Events::EventBus", {"Name": "ml-events"})
    imported.template.has_resource_properties(
        "AWS::Events::Rule", {"EventPattern": Match.object_like({"source": ["acme.tornasole"]})}
    )
    assert not imported.resources("AWS::CloudWatch::Alarm")
    assert {
        g["Properties"]["RetentionInDays"] for g in imported.resources("AWS::Logs::LogGroup").values()
    } == {90}
    table = next(iter(imported.template.find_resources("AWS::DynamoDB::Table").values()))
    assert table["DeletionPolicy"] == "Delete"

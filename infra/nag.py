"""cdk-nag (v3 API): the AwsSolutions and Serverless packs, and each acknowledged finding with its reason.

Acknowledgements are attached to the narrowest construct they concern, so a new resource that
trips the same rule elsewhere still fails synthesis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, ServerlessChecks

from tornasole.stack_spec import CAPTURE_REQUESTS_DIR, REPORT_FILE, STOP_SIGNAL_FILE

if TYPE_CHECKING:
    from constructs import IConstruct

    from infra.stack import TornasoleStack

__all__ = ["add_nag_checks", "acknowledge_findings"]

# The CDK-provided singleton Lambda that applies S3 notification configurations.
_NOTIFICATIONS_HANDLER = "BucketNotificationsHandler050a0587b7544547bf325f094a3db834"


def add_nag_checks(app: cdk.App) -> None:
    """Run both packs on every synth: unacknowledged errors fail ``cdk synth`` / ``python app.py``."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))


def _ack(scope: IConstruct, reasons: dict[str, str]) -> None:
    for rule_id, reason in reasons.items():
        cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))


def _arn(stack: TornasoleStack, construct: IConstruct, name: str) -> str:
    """How cdk-nag prints a resource ARN: ``<LogicalId.Arn>`` for ours, the literal ARN for imports."""
    child = construct.node.default_child
    if child is not None:
        return f"<{stack.get_logical_id(child)}.Arn>"
    return f"arn:<AWS::Partition>:s3:::{name}"


def _prefixes(stack: TornasoleStack) -> tuple[str, str]:
    """The trial and rule prefix wildcards as cdk-nag prints them."""
    cfg = stack.config
    trials = _arn(stack, stack.storage.bucket, cfg.existing_bucket_name or "") + f"/{cfg.trial_prefix}*"
    rules_bucket_name, rules_prefix = cfg.custom_rules_location
    rules_bucket = stack.rules_bucket
    rules = (
        _arn(stack, rules_bucket, rules_bucket_name or cfg.existing_bucket_name or "") + f"/{rules_prefix}*"
    )
    return trials, rules


def _grant_findings(stack: TornasoleStack) -> list[tuple[str, str]]:
    """The object wildcards of ``infra/grants.py``: each one a prefix of our bucket, nothing wider."""
    trials, _ = _prefixes(stack)
    return [
        (
            f"Resource::{trials}",
            "s3:GetObject only (ranged GETs of step files), by the functions that evaluate or complete "
            "jobs: every object under the trial prefix is a step file a rule or a job's report may read.",
        ),
        (
            f"Resource::{trials}{STOP_SIGNAL_FILE}",
            "s3:PutObject only, of a trial's stop-signal file (the stoptraining action), nothing else.",
        ),
        (
            f"Resource::{trials}{CAPTURE_REQUESTS_DIR}/*.json",
            "s3:PutObject only, of a trial's capture requests (the capture action), nothing else.",
        ),
        (
            f"Resource::{trials}{REPORT_FILE}",
            "s3:PutObject only, of a trial's HTML report (written when its job ends), nothing else.",
        ),
    ]


def _reader_findings(stack: TornasoleStack) -> list[tuple[str, str]]:
    """The rule sandbox's reader role: prefixes narrowed to one job by every session's policy."""
    trials, rules = _prefixes(stack)
    return [
        (
            f"Resource::{trials}",
            "s3:GetObject only, by the rule sandbox's reader role; every session the evaluator opens "
            "carries a session policy narrowing it to one job's trial prefix.",
        ),
        (
            f"Resource::{rules}",
            "s3:GetObject only: custom rule sources are loaded only from under this configured prefix "
            "(the evaluator and the sandbox refuse any other source unless "
            "TORNASOLE_ALLOW_RULES_FROM_TRIALS is set); each session is narrowed to its one rule file.",
        ),
    ]


_MANAGED_BASIC_EXECUTION = (
    "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
)
_DLQ = (
    "This queue IS the dead-letter queue (on-failure destination, stream OnFailure, EventBridge target "
    "and SNS "
)
_ASYNC = "Async failures go to an on-failure destination (the failure queue), which supersedes a DLQ and "

_STORAGE = {
    "AwsSolutions-S1": "Server access logs need a second bucket and cost storage at rest; enable "
    "CloudTrail S3 data events per account if you need an audit trail. Nothing in the bucket is public.",
}
_EVALUATOR = {
    "AwsSolutions-L1": "The layer's native wheels (numpy, protobuf, google-crc32c) are built for cp312; "
    "python3.12 is a supported runtime. Move it together with requirements/layer.txt.",
    "Serverless-LambdaLatestVersion": "Pinned to python3.12 on purpose: the layer's native wheels are cp312.",
    "AwsSolutions-IAM5[Resource::*]": "X-Ray PutTraceSegments/PutTelemetryRecords (Tracing.ACTIVE) and "
    "dynamodb:ListStreams (stream event source) have no resource-level permissions: AWS requires "
    "Resource '*' for them, and for nothing else here.",
    "AwsSolutions-SQS3": _DLQ + "subscription DLQ); it has no DLQ of its own.",
    "Serverless-SQSRedrivePolicy": _DLQ
    + "subscription DLQ); an alarm tells a person to inspect and redrive.",
    "Serverless-LambdaDLQ": _ASYNC
    + "also records the error; stream batches park through the mapping's OnFailure.",
}
_SANDBOX = {
    "AwsSolutions-L1": _EVALUATOR["AwsSolutions-L1"],
    "Serverless-LambdaLatestVersion": _EVALUATOR["Serverless-LambdaLatestVersion"],
    "Serverless-LambdaDLQ": "Invoked synchronously only (RequestResponse), by the evaluator, which "
    "records a failed invocation as the rule's error at that step: there is no asynchronous event to park.",
    "Serverless-LambdaTracing": "No tracing on purpose: X-Ray would add permissions to a role that holds "
    "nothing but its log group; the evaluator's trace covers the invocation.",
}
_CDK_NOTIFICATIONS_HANDLER = {
    f"AwsSolutions-IAM4[{_MANAGED_BASIC_EXECUTION}]": "aws-cdk-lib's own BucketNotificationsHandler "
    "(runs only while CloudFormation applies the bucket notification configuration) uses the basic "
    "execution role.",
}


_TOPICS_KEY = {
    "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]": "Publishing to a KMS-encrypted SNS topic needs "
    "kms:GenerateDataKey* (GenerateDataKey and its WithoutPlaintext form, as SNS calls them) on the "
    "topics' key: aws-cdk-lib's Topic.grant_publish grants it, on that one key ARN only.",
}


def acknowledge_findings(stack: TornasoleStack) -> None:
    """Acknowledge the findings that are deliberate, each with the reason a reviewer needs."""
    _ack(stack.storage, _STORAGE)
    _ack(stack.evaluator, _EVALUATOR)
    _ack(stack.evaluator, _TOPICS_KEY)
    _ack(stack.alerts, _TOPICS_KEY)
    _ack(stack.alert_destinations, _TOPICS_KEY)  # the chat channels' topics share the alerts' key
    _ack(
        stack.evaluator,
        {f"AwsSolutions-IAM5[{finding}]": reason for finding, reason in _grant_findings(stack)},
    )
    _ack(stack.rule_sandbox, _SANDBOX)
    _ack(
        stack.rule_sandbox,
        {f"AwsSolutions-IAM5[{finding}]": reason for finding, reason in _reader_findings(stack)},
    )
    handler = stack.node.try_find_child(_NOTIFICATIONS_HANDLER)
    if handler is not None:
        _ack(handler, _CDK_NOTIFICATIONS_HANDLER)

"""TornasoleStack: composes the constructs, does every grant, and prints what a user needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import RETENTION_DAYS, StackConfig
from infra.constructs.alert_destinations import AlertDestinations
from infra.constructs.alerts import Alerts
from infra.constructs.evaluator import Evaluator
from infra.constructs.events import EventBus
from infra.constructs.monitoring import Monitoring
from infra.constructs.rule_sandbox import RuleSandbox
from infra.constructs.state import StateTable
from infra.constructs.storage import TrialStorage
from infra.grants import (
    JOB_PARTITIONS,
    ON_OBJECT_CREATED_TABLE_ACTIONS,
    PUBLISH_EVENTS_TABLE_ACTIONS,
    REGISTRATION_PARTITIONS,
    SAGEMAKER_STATE_CHANGE_TABLE_ACTIONS,
    SCHEDULED_CHECK_TABLE_ACTIONS,
    allow_index_query,
    allow_reads,
    allow_reports,
    allow_rule_sandbox,
    allow_stop_signals,
    allow_table,
)
from tornasole import config as env_names
from tornasole.alerts.destinations import format_destinations
from tornasole.stack_spec import (
    DEFAULT_SPEC,
    ENV_CUSTOM_RULE_FUNCTION,
    ENV_CUSTOM_RULE_READER_ROLE,
    ENV_CUSTOM_RULES_PREFIX,
    ENV_TRIAL_PREFIX,
    StackSpec,
)

__all__ = ["TornasoleStack", "REPO_ROOT"]

REPO_ROOT = Path(__file__).resolve().parent.parent


class TornasoleStack(cdk.Stack):
    """Trial bucket -> step notifications -> evaluator -> state table -> outbox -> bus -> alerts."""

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        config: StackConfig,
        spec: StackSpec = DEFAULT_SPEC,
        layer_dir: Path | None = None,
        functions_root: Path | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id_, **kwargs)
        removal = (
            cdk.RemovalPolicy.DESTROY if config.removal_policy == "destroy" else cdk.RemovalPolicy.RETAIN
        )
        storage = TrialStorage(
            self,
            "Storage",
            trial_prefix=config.trial_prefix,
            bucket_name=config.bucket_name,
            existing_bucket_name=config.existing_bucket_name,
            trial_expiration_days=config.trial_expiration_days,
            removal_policy=removal,
        )
        state = StateTable(
            self, "State", spec=spec.table, table_name=config.state_table_name, removal_policy=removal
        )
        bus = EventBus(self, "Events", bus_name=config.event_bus_name, source=config.event_source)
        rules_bucket_name, rules_prefix = config.custom_rules_location
        rules_bucket = (
            s3.Bucket.from_bucket_name(self, "CustomRulesBucket", rules_bucket_name)
            if rules_bucket_name
            else storage.bucket
        )
        evaluator = Evaluator(
            self,
            "Evaluator",
            spec=spec,
            layer_dir=layer_dir or REPO_ROOT / config.layer_path,
            functions_root=functions_root or REPO_ROOT / "functions",
            architecture=config.lambda_architecture,
            memory_mb=config.lambda_memory_mb,
            environment={
                env_names.STATE_TABLE: state.table.table_name,
                env_names.EVENT_BUS: bus.event_bus.event_bus_name,
                env_names.EVENT_SOURCE: config.event_source,
                env_names.TRIAL_BUCKET: storage.bucket.bucket_name,
                ENV_TRIAL_PREFIX: config.trial_prefix,
                ENV_CUSTOM_RULES_PREFIX: f"s3://{rules_bucket.bucket_name}/{rules_prefix}",
                "POWERTOOLS_SERVICE_NAME": spec.service_name,
                "POWERTOOLS_METRICS_NAMESPACE": spec.metrics_namespace,
            },
            log_retention=_retention(config.log_retention_days),
            removal_policy=removal,
            reserved_concurrency=config.reserved_concurrency,
        )
        # Custom rules run in the sandbox, with credentials the evaluating functions scope to each job.
        evaluating = (evaluator.on_object_created, evaluator.scheduled_check)
        sandbox = RuleSandbox(
            self,
            "RuleSandbox",
            spec=spec.custom_rule,
            layer=evaluator.layer,
            runtime=evaluator.runtime,
            architecture=evaluator.architecture,
            functions_root=functions_root or REPO_ROOT / "functions",
            environment={
                env_names.TRIAL_BUCKET: storage.bucket.bucket_name,
                ENV_TRIAL_PREFIX: config.trial_prefix,
                ENV_CUSTOM_RULES_PREFIX: f"s3://{rules_bucket.bucket_name}/{rules_prefix}",
                "POWERTOOLS_SERVICE_NAME": spec.service_name,
            },
            log_retention=_retention(config.log_retention_days),
            removal_policy=removal,
            callers=[fn.role for fn in evaluating if fn.role is not None],
            bucket=storage.bucket,
            trial_prefix=config.trial_prefix,
            rules_bucket=rules_bucket,
            rules_prefix=rules_prefix,
            flow_log=config.sandbox_flow_log,
        )
        for fn in evaluating:
            fn.add_environment(ENV_CUSTOM_RULE_FUNCTION, sandbox.function.function_name)
            fn.add_environment(ENV_CUSTOM_RULE_READER_ROLE, sandbox.reader.role_arn)
            allow_rule_sandbox(fn, sandbox=sandbox.function, reader=sandbox.reader)
        alerts = Alerts(
            self,
            "Alerts",
            spec=spec.alerts,
            bus=bus.event_bus,
            source=config.event_source,
            emails=config.alert_emails,
            failures=evaluator.failures,
            alert_lambda_arn=config.alert_lambda_arn,
        )
        destinations = AlertDestinations(
            self,
            "AlertDestinations",
            bus=bus.event_bus,
            source=config.event_source,
            key=alerts.key,
            failures=evaluator.failures,
            webhooks=config.alert_webhooks,
            slack_channels=config.alert_slack_channels,
            teams_channels=config.alert_teams_channels,
        )
        for fn in evaluator.functions:
            fn.add_environment(env_names.ALERT_TOPIC_ARN, alerts.actions_topic.topic_arn)
            # registration (tornasole_job.json) accepts webhook/slack/teams actions naming these only
            fn.add_environment(env_names.ALERT_DESTINATIONS, format_destinations(config.alert_destinations))

        # --- grants: each function gets exactly the calls its code makes, on the keys it touches ---
        # (infra/grants.py; proven against the handlers' recorded calls in tests/infra)
        on_created, publish, scheduled = (
            evaluator.on_object_created,
            evaluator.publish_events,
            evaluator.scheduled_check,
        )
        table, index = state.table, spec.table.gsi.name
        # on_object_created: evaluates steps, registers jobs from their files, holds early steps.
        allow_table(on_created, table, ON_OBJECT_CREATED_TABLE_ACTIONS, REGISTRATION_PARTITIONS)
        # scheduled_check: re-evaluates pending steps, completes jobs, re-sends unpublished events.
        allow_table(scheduled, table, SCHEDULED_CHECK_TABLE_ACTIONS, JOB_PARTITIONS)
        # publish_events: claims and marks outbox rows, moves a job to Stopping.
        allow_table(publish, table, PUBLISH_EVENTS_TABLE_ACTIONS, JOB_PARTITIONS)
        for fn in (on_created, scheduled):  # the GSI: pending steps, active jobs, unpublished rows
            allow_index_query(fn, table, index)
        for fn in (on_created, scheduled):  # evaluate steps (scheduled_check re-evaluates pending ones)
            allow_reads(fn, bucket=storage.bucket, trial_prefix=config.trial_prefix)
        for fn in (publish, scheduled):  # deliver outbox items (scheduled_check re-sends unpublished ones)
            bus.event_bus.grant_put_events_to(fn)
            alerts.actions_topic.grant_publish(fn)
            allow_stop_signals(fn, bucket=storage.bucket, trial_prefix=config.trial_prefix)

        # sagemaker_state_change: ends the job SageMaker's event names (lists its trial, completes it).
        sagemaker = evaluator.sagemaker_state_change
        allow_table(sagemaker, table, SAGEMAKER_STATE_CHANGE_TABLE_ACTIONS, JOB_PARTITIONS)
        # it reads the trial too: the job's report (loss, layer norms, profiler files) is drawn from it
        allow_reads(sagemaker, bucket=storage.bucket, trial_prefix=config.trial_prefix)
        # every function that can complete a job writes its report next to the trial (evaluator.completion)
        for fn in (on_created, scheduled, sagemaker):
            allow_reports(fn, bucket=storage.bucket, trial_prefix=config.trial_prefix)

        # --- triggers ---
        storage.notify_on_step_files(on_created, suffixes=spec.notifications.suffixes)
        evaluator.consume_stream(state.table)
        if config.alarms:
            Monitoring(
                self,
                "Monitoring",
                functions=(*evaluator.functions, sandbox.function),
                failures=evaluator.failures,
                stream_consumer=publish,
                topic=alerts.status_topic,
            )

        self.config, self.rules_bucket = config, rules_bucket
        self.storage, self.state, self.bus = storage, state, bus
        self.evaluator, self.alerts, self.rule_sandbox = evaluator, alerts, sandbox
        self.alert_destinations = destinations
        self._outputs(config)

    def _outputs(self, config: StackConfig) -> None:
        bucket = self.storage.bucket.bucket_name
        table = self.state.table.table_name
        bus = self.bus.event_bus.event_bus_name
        destinations = format_destinations(config.alert_destinations)
        outputs = {
            "BucketName": (bucket, "Trial bucket: point the hook's out_dir / S3OutputPath here"),
            "TrialPrefix": (config.trial_prefix, "Key prefix trials must be written under"),
            "EventBusName": (bus, "Subscribe to Tornasole events on this bus"),
            "EventSource": (config.event_source, "The `source` of Tornasole's events"),
            "AlertTopicArn": (self.alerts.actions_topic.topic_arn, "SNS topic of email/sms rule actions"),
            "StatusTopicArn": (self.alerts.status_topic.topic_arn, "SNS topic of IssuesFound/Error alerts"),
            "StateTableName": (table, "DynamoDB state table"),
            "FailureQueueUrl": (self.evaluator.failures.queue_url, "Events/invocations that failed for good"),
            "AlertDestinationNames": (
                destinations or "none",
                "webhook/slack/teams destinations a job's action may name (docs/ALERTS.md)",
            ),
            "RegisterJobCommand": (
                f"AWS_REGION={cdk.Aws.REGION} {env_names.STATE_TABLE}={table} {env_names.EVENT_BUS}={bus} "
                f"{env_names.ALERT_DESTINATIONS}={destinations} "
                "tornasole jobs register --name my-job "
                f"--s3-output s3://{bucket}/{config.trial_prefix}my-job --rule VanishingGradient",
                "Register a job (or upload tornasole_job.json to the trial root)",
            ),
        }
        for key, (value, description) in outputs.items():
            cdk.CfnOutput(self, key, value=value, description=description)


def _retention(days: int) -> logs.RetentionDays:
    return logs.RetentionDays[RETENTION_DAYS[days]]

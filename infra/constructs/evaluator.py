"""The evaluator: the ``tornasole`` layer, the three functions, their failure queue and triggers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as ddb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import ConfigError
from tornasole.stack_spec import SAGEMAKER_END_EVENT_PATTERN, FunctionSpec, StackSpec

__all__ = ["Evaluator", "LAYER_MARKER"]

RUNTIME = lambda_.Runtime.PYTHON_3_12
# Written by scripts/build_layer.sh: the architecture the layer's native wheels were built for.
LAYER_MARKER = "python/.tornasole-layer"
# Local byproducts that must neither ship nor change an asset's hash.
_NOT_SHIPPED = ["**/__pycache__", "**/*.pyc"]


def _layer_code(layer_dir: Path, architecture: str) -> lambda_.Code:
    marker = layer_dir / LAYER_MARKER
    if not marker.is_file():
        raise ConfigError(
            f"layer asset {layer_dir} is missing or incomplete: run `make layer "
            f"ARCH={architecture}` (or set --context layer_dir=...)"
        )
    built_for = dict(line.split("=", 1) for line in marker.read_text().split())
    if built_for.get("arch") != architecture:
        raise ConfigError(
            f"layer asset {layer_dir} was built for {built_for.get('arch')!r} but "
            f"--context lambda_architecture={architecture}: run `make layer ARCH={architecture}`"
        )
    return lambda_.Code.from_asset(str(layer_dir), exclude=_NOT_SHIPPED)


class Evaluator(Construct):
    """Functions from ``stack_spec`` (assets under ``functions_root``) sharing one layer and one DLQ.

    Each function gets its own role (no managed policies: logs go to its own log group with a
    retention, granted explicitly), X-Ray tracing and the environment in ``environment``.
    Asynchronous invocations that still fail after retries, stream batches that cannot be
    published, and schedule deliveries that fail all land in :attr:`failures`.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        spec: StackSpec,
        layer_dir: Path,
        functions_root: Path,
        architecture: str,
        memory_mb: int,
        environment: Mapping[str, str],
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(scope, id_)
        self._spec = spec
        self._root = functions_root
        self._arch = lambda_.Architecture.ARM_64 if architecture == "arm64" else lambda_.Architecture.X86_64
        self._env = dict(environment)
        self._retention = log_retention
        self._removal = removal_policy
        self.failures = sqs.Queue(
            self,
            "Failures",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
            removal_policy=removal_policy,
        )
        self.layer = lambda_.LayerVersion(
            self,
            "Layer",
            code=_layer_code(layer_dir, architecture),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[self._arch],
            description="tornasole library + numpy, protobuf, google-crc32c, powertools[tracer] (cp312)",
            removal_policy=removal_policy,
        )
        self.on_object_created = self._python_function(
            spec.on_object_created, memory_mb=memory_mb, reserved_concurrency=reserved_concurrency
        )
        self.publish_events = self._python_function(
            spec.publish_events, memory_mb=spec.publish_events.memory_mb
        )
        self.scheduled_check = self._python_function(spec.scheduled_check, memory_mb=memory_mb)
        self.schedule = events.Rule(
            self,
            "Schedule",
            schedule=events.Schedule.expression(spec.schedule_expression),
            description="Tornasole: stalled-training check, completion, outbox re-drive",
            targets=[
                targets.LambdaFunction(
                    self.scheduled_check, dead_letter_queue=self.failures, retry_attempts=2
                )
            ],
        )

        # SageMaker's own end of training (its hook writes no end marker there): the account's default
        # bus, SageMaker's events only, terminal statuses only (stack_spec.SAGEMAKER_END_EVENT_PATTERN).
        self.sagemaker_state_change = self._python_function(
            spec.sagemaker_state_change, memory_mb=spec.sagemaker_state_change.memory_mb
        )
        pattern = SAGEMAKER_END_EVENT_PATTERN
        self.sagemaker_ended = events.Rule(
            self,
            "SageMakerTrainingEnded",
            event_pattern=events.EventPattern(
                source=pattern["source"], detail_type=pattern["detail-type"], detail=pattern["detail"]
            ),
            description="Tornasole: a SageMaker training job ended -> settle the job of that name",
            targets=[
                targets.LambdaFunction(
                    self.sagemaker_state_change, dead_letter_queue=self.failures, retry_attempts=2
                )
            ],
        )

    @property
    def runtime(self) -> lambda_.Runtime:
        return RUNTIME

    @property
    def architecture(self) -> lambda_.Architecture:
        return self._arch

    @property
    def functions(self) -> tuple[lambda_.Function, ...]:
        return (
            self.on_object_created,
            self.publish_events,
            self.scheduled_check,
            self.sagemaker_state_change,
        )

    def _python_function(
        self, fspec: FunctionSpec, *, memory_mb: int, reserved_concurrency: int | None = None
    ) -> lambda_.Function:
        """The one way a Tornasole function is built."""
        log_group = logs.LogGroup(
            self, f"{fspec.id}Logs", retention=self._retention, removal_policy=self._removal
        )
        role = iam.Role(
            self,
            f"{fspec.id}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Tornasole {fspec.id}",
        )
        log_group.grant_write(role)
        return lambda_.Function(
            self,
            fspec.id,
            runtime=RUNTIME,
            architecture=self._arch,
            handler=fspec.handler,
            code=lambda_.Code.from_asset(str(self._root / Path(fspec.asset_dir).name), exclude=_NOT_SHIPPED),
            layers=[self.layer],
            memory_size=memory_mb,
            timeout=Duration.seconds(fspec.timeout_s),
            description=fspec.description,
            environment=self._env,
            role=role,
            log_group=log_group,
            tracing=lambda_.Tracing.ACTIVE,
            reserved_concurrent_executions=reserved_concurrency,
            retry_attempts=2,
            on_failure=destinations.SqsDestination(self.failures),
        )

    def consume_stream(self, table: ddb.ITable) -> None:
        """Drain ``table``'s stream (outbox inserts) into ``publish_events``; poison batches are bisected,
        retried, then parked in :attr:`failures` (``scheduled_check`` re-drives unpublished items)."""
        self.publish_events.add_event_source(
            sources.DynamoEventSource(
                table,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=self._spec.stream_batch_size,
                bisect_batch_on_error=True,
                retry_attempts=self._spec.stream_retry_attempts,
                report_batch_item_failures=self._spec.stream_report_batch_item_failures,
                filters=[{"pattern": self._spec.stream_filter_pattern}],  # outbox inserts only
                max_record_age=Duration.days(1),
                on_failure=sources.SqsDlq(self.failures),
            )
        )

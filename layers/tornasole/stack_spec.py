"""The one definition of Tornasole's serverless resources: names, keys, defaults.

Why this module exists: the CDK app (``infra/``), the local mode (moto) and the
evaluator code must agree on every name (table keys, bus, detail-types, file
names the training job and the evaluator exchange). Defining them once, as pure
data, means a rename cannot silently split the deployed stack from the code
that runs inside it. Nothing here touches AWS or reads the environment.

Examples
--------
>>> from tornasole.stack_spec import DEFAULT_SPEC
>>> DEFAULT_SPEC.table.partition_key, DEFAULT_SPEC.bus.name
('pk', 'tornasole')
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tornasole import config

__all__ = [
    "StackSpec",
    "TableSpec",
    "IndexSpec",
    "BusSpec",
    "AlertSpec",
    "FunctionSpec",
    "NotificationSpec",
    "DEFAULT_SPEC",
    "DETAIL_TYPE_JOB_STATE_CHANGE",
    "DETAIL_TYPE_RULE_ISSUE_FOUND",
    "DETAIL_TYPE_TRIAL_REWRITTEN",
    "SAGEMAKER_SOURCE",
    "SAGEMAKER_END_EVENT_PATTERN",
    "JOB_CONFIG_FILE",
    "STOP_SIGNAL_FILE",
    "REPORT_FILE",
    "END_MARKER_FILE",
    "EVENT_ID_FIELD",
    "ENV_TRIAL_PREFIX",
    "ENV_CUSTOM_RULES_PREFIX",
    "prefixes_overlap",
    "ENV_CUSTOM_RULE_FUNCTION",
    "ENV_CUSTOM_RULE_READER_ROLE",
    "ALERT_ATTR_ACTION",
    "ALERT_ATTR_ENDPOINT",
    "ALERT_ATTR_JOB",
]

# --- files exchanged between a training job and the evaluator (trial-root relative) ---
# A training job uploads this next to its output (at the trial root) to register itself.
JOB_CONFIG_FILE = "tornasole_job.json"
# The evaluator writes this at the trial root for a ``stoptraining`` action; the hook polls it.
STOP_SIGNAL_FILE = "tornasole_stop_training.json"
# The evaluator writes one file per rule in this folder at the trial root for a ``capture`` action; the hook
# lists it (tornasole.format.capture_request).
CAPTURE_REQUESTS_DIR = "tornasole_capture"
# smdebug's (empty) end-of-training marker at the trial root.
END_MARKER_FILE = "training_job_end.ts"
# The evaluator writes a job's HTML report here at the trial root when the job ends (docs/REPORTS.md).
REPORT_FILE = "tornasole-report.html"

# --- EventBridge ---
DETAIL_TYPE_JOB_STATE_CHANGE = "SageMaker Training Job State Change"
DETAIL_TYPE_RULE_ISSUE_FOUND = "Tornasole Rule Issue Found"
# An ended job's trial was written again (evaluator.lifecycle): announced once per job.
DETAIL_TYPE_TRIAL_REWRITTEN = "Tornasole Trial Rewritten"
# SageMaker's own events on the account's default bus (source aws.sagemaker): a training job that ended. The
# stack's rule (and the local mode's) matches exactly these; the handler checks the shape again.
SAGEMAKER_SOURCE = "aws.sagemaker"
SAGEMAKER_END_EVENT_PATTERN = {
    "source": [SAGEMAKER_SOURCE],
    "detail-type": [DETAIL_TYPE_JOB_STATE_CHANGE],
    "detail": {"TrainingJobStatus": ["Completed", "Failed", "Stopped"]},
}
# Field of every event's detail holding the deterministic id a consumer dedupes on.
EVENT_ID_FIELD = "TornasoleEventId"

# --- extra handler settings (names shared with infra/stack.py) ---
# Key prefix of trials inside the trial bucket; keys outside it are not ours and are ignored.
ENV_TRIAL_PREFIX = "TORNASOLE_TRIAL_PREFIX"
# s3:// prefix custom rule files may be loaded from; it may not overlap the trial prefix
# (``prefixes_overlap``): whoever writes training data must not be able to write rule code.
ENV_CUSTOM_RULES_PREFIX = "TORNASOLE_CUSTOM_RULES_PREFIX"


def prefixes_overlap(first: str, second: str) -> bool:
    """Whether two key prefixes of one bucket share keys: one is the other's prefix ('' is every key).

    Examples
    --------
    >>> prefixes_overlap("trials/", "trials/rules/"), prefixes_overlap("trials/", "custom-rules/")
    (True, False)
    """
    return first.startswith(second) or second.startswith(first)


# The rule sandbox (custom rules run there, not in the evaluator, when both are set): its function
# name and the role whose job-scoped session credentials it is handed.
ENV_CUSTOM_RULE_FUNCTION = "TORNASOLE_CUSTOM_RULE_FUNCTION"
ENV_CUSTOM_RULE_READER_ROLE = "TORNASOLE_CUSTOM_RULE_READER_ROLE"

# --- SNS message attributes (subscription filter policies match on these) ---
ALERT_ATTR_ACTION = "tornasole_action"  # "email" | "sms"
ALERT_ATTR_ENDPOINT = "tornasole_endpoint"  # the address / phone number from action_json
ALERT_ATTR_JOB = "tornasole_training_job"  # TrainingJobName


@dataclass(frozen=True)
class IndexSpec:
    """A global secondary index (sparse: only items carrying its key attributes appear)."""

    name: str
    partition_key: str
    sort_key: str
    projection: str = "ALL"


@dataclass(frozen=True)
class TableSpec:
    """The single state table (design: ``tornasole.evaluator.store.state_table`` docstring).

    All key attributes are strings. ``gsi1`` is sparse: it holds active jobs,
    steps waiting for evaluation, and unpublished outbox items, so the scheduled
    check reads only what needs attention.
    """

    name: str = "tornasole-state"
    partition_key: str = "pk"
    sort_key: str = "sk"
    gsi: IndexSpec = field(default_factory=lambda: IndexSpec("gsi1", "gsi1pk", "gsi1sk"))
    ttl_attribute: str = "expires_at"
    stream_view_type: str = "NEW_IMAGE"
    billing_mode: str = "PAY_PER_REQUEST"


@dataclass(frozen=True)
class BusSpec:
    """The custom event bus and what Tornasole puts on it."""

    name: str = "tornasole"
    source: str = "tornasole"
    detail_types: tuple[str, ...] = (DETAIL_TYPE_JOB_STATE_CHANGE, DETAIL_TYPE_RULE_ISSUE_FOUND)


@dataclass(frozen=True)
class AlertSpec:
    """SNS topic for ``email`` / ``sms`` actions; subscriptions filter on the attributes."""

    topic_name: str = "tornasole-alerts"
    attr_action: str = ALERT_ATTR_ACTION
    attr_endpoint: str = ALERT_ATTR_ENDPOINT
    attr_job: str = ALERT_ATTR_JOB


@dataclass(frozen=True)
class NotificationSpec:
    """S3 ObjectCreated notifications that drive ``on_object_created``.

    S3 filters allow one prefix and one suffix per configuration, so the stack
    adds one configuration per suffix; the handler checks the key's exact shape.
    """

    suffixes: tuple[str, ...] = (".json", END_MARKER_FILE)
    prefix: str = ""


@dataclass(frozen=True)
class FunctionSpec:
    """One Lambda function: its asset directory (repo-relative) and handler."""

    id: str
    asset_dir: str
    handler: str = "handler.handler"
    memory_mb: int = 1024
    timeout_s: int = 300
    description: str = ""


@dataclass(frozen=True)
class StackSpec:
    """Everything the CDK app and the local mode need to build the same resources. The functions' specs
    are frozen, so one default instance serves every StackSpec."""

    table: TableSpec = field(default_factory=TableSpec)
    bus: BusSpec = field(default_factory=BusSpec)
    alerts: AlertSpec = field(default_factory=AlertSpec)
    notifications: NotificationSpec = field(default_factory=NotificationSpec)
    # EventBridge schedule expression of the scheduled check.
    schedule_expression: str = "rate(5 minutes)"
    schedule_minutes: int = 5
    metrics_namespace: str = "Tornasole"
    service_name: str = "tornasole-evaluator"
    layer_dir: str = "layers"
    on_object_created: FunctionSpec = FunctionSpec(
        "OnObjectCreated",
        "functions/on_object_created",
        description="S3 ObjectCreated (index, collections, end marker, tornasole_job.json) -> evaluate",
    )
    publish_events: FunctionSpec = FunctionSpec(
        "PublishEvents",
        "functions/publish_events",
        memory_mb=256,
        timeout_s=60,
        description="DynamoDB stream (outbox items) -> EventBridge / SNS",
    )
    scheduled_check: FunctionSpec = FunctionSpec(
        "ScheduledCheck",
        "functions/scheduled_check",
        description="Schedule: stalled-training checks, completion, outbox re-drive",
    )
    # SageMaker's "Training Job State Change" events (default bus) -> the job of that name ends.
    sagemaker_state_change: FunctionSpec = FunctionSpec(
        "SageMakerStateChange",
        "functions/sagemaker_state_change",
        memory_mb=512,
        timeout_s=120,
        description="SageMaker Training Job State Change (aws.sagemaker) -> end the job of that name",
    )
    # The rule sandbox: invoked by the evaluator, not by a trigger (hence not in ``functions``).
    custom_rule: FunctionSpec = FunctionSpec(
        "CustomRule",
        "functions/custom_rule",
        timeout_s=120,
        description="Rule sandbox: one custom rule at one step, with job-scoped read-only credentials",
    )
    # DynamoDB stream -> publish_events: batch settings. Report batch item failures (the handler returns
    # ``batchItemFailures``) and filter the stream to outbox inserts (``stream_filter_pattern``).
    stream_batch_size: int = 100
    stream_retry_attempts: int = 10
    stream_report_batch_item_failures: bool = True
    stream_filter_pattern: str = (
        '{"eventName": ["INSERT"], "dynamodb": {"Keys": {"sk": {"S": [{"prefix": "OUTBOX#"}]}}}}'
    )
    # Env var names (tornasole.config) each function receives, mapped to what they hold.
    env_table: str = config.STATE_TABLE
    env_bus: str = config.EVENT_BUS
    env_source: str = config.EVENT_SOURCE
    env_alert_topic: str = config.ALERT_TOPIC_ARN
    env_trial_bucket: str = config.TRIAL_BUCKET

    @property
    def functions(self) -> tuple[FunctionSpec, ...]:
        return (
            self.on_object_created,
            self.publish_events,
            self.scheduled_check,
            self.sagemaker_state_change,
        )


DEFAULT_SPEC = StackSpec()

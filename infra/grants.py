"""Each function's permissions, action by action, scoped to the keys its code touches.

Why not CDK's ``grant_read_write_data`` / ``grant_read`` / ``grant_put``: they grant families
(``s3:GetObject*``, ``s3:List*``, ``dynamodb:Scan``, ``dynamodb:BatchWriteItem``, ...) that no
Tornasole function calls, on the whole table and bucket. Here every statement names exactly the
actions a function's code makes (``tests/infra/test_infra_least_privilege.py`` runs the real
handlers against moto, records every call and checks it against these statements, both ways).

DynamoDB statements carry a ``dynamodb:LeadingKeys`` condition with the partition-key shapes of
``tornasole.evaluator.store.keys``: the publisher and the scheduled check touch only job partitions
(``JOB#<name>``); only ``on_object_created`` (registration by file, orphan steps, trial ownership)
also touches trial partitions (``TRIAL#<path>``) and the job registry (``JOBS``). Queries on the
sparse GSI (pending steps, active jobs, unpublished outbox rows) get their own statement on the
index ARN only.

Custom rule code never runs with these roles: the evaluating functions may only assume the rule
sandbox's reader role and invoke the sandbox function (``allow_rule_sandbox``); the reads a rule
makes are the reader role's, narrowed per job (``infra/constructs/rule_sandbox.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import aws_dynamodb as ddb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3

from tornasole.evaluator.store.keys import JOBS_PK, job_pk, trial_pk
from tornasole.stack_spec import CAPTURE_REQUESTS_DIR, REPORT_FILE, STOP_SIGNAL_FILE

__all__ = [
    "JOB_PARTITIONS",
    "ON_OBJECT_CREATED_TABLE_ACTIONS",
    "PUBLISH_EVENTS_TABLE_ACTIONS",
    "SCHEDULED_CHECK_TABLE_ACTIONS",
    "SAGEMAKER_STATE_CHANGE_TABLE_ACTIONS",
    "REGISTRATION_PARTITIONS",
    "allow_table",
    "allow_index_query",
    "allow_reads",
    "allow_trial_listing",
    "allow_rule_sandbox",
    "allow_stop_signals",
    "allow_reports",
]

#: The partitions of jobs (meta, rules, steps, evaluations, outbox rows): ``keys.job_pk``.
JOB_PARTITIONS = (job_pk("*"),)
#: Plus what registering a job from its file and holding early steps touch: ``keys.trial_pk``, the registry.
REGISTRATION_PARTITIONS = (*JOB_PARTITIONS, trial_pk("*"), JOBS_PK)

# The DynamoDB actions each function's code makes (a transaction is authorized item by item, by the
# action of each item: Put -> PutItem, Update -> UpdateItem, Delete -> DeleteItem).
ON_OBJECT_CREATED_TABLE_ACTIONS = ("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem")
SCHEDULED_CHECK_TABLE_ACTIONS = ("GetItem", "Query", "PutItem", "UpdateItem")
PUBLISH_EVENTS_TABLE_ACTIONS = ("UpdateItem",)
# Reads the job, notes the end of training and completes it (a transaction: the outbox row is a Put).
SAGEMAKER_STATE_CHANGE_TABLE_ACTIONS = ("Query", "PutItem", "UpdateItem")


def allow_table(
    fn: lambda_.Function, table: ddb.ITable, actions: Iterable[str], partitions: Iterable[str]
) -> None:
    """``actions`` on ``table``'s items whose partition key matches one of ``partitions`` only."""
    fn.add_to_role_policy(
        iam.PolicyStatement(
            actions=sorted(f"dynamodb:{a}" for a in actions),
            resources=[table.table_arn],
            conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": list(partitions)}},
        )
    )


def allow_index_query(fn: lambda_.Function, table: ddb.ITable, index_name: str) -> None:
    fn.add_to_role_policy(
        iam.PolicyStatement(actions=["dynamodb:Query"], resources=[f"{table.table_arn}/index/{index_name}"])
    )


def allow_reads(fn: lambda_.Function, *, bucket: s3.IBucket, trial_prefix: str) -> None:
    """GetObject (ranged GETs, HEADs) of step files, and listing the trials (no rule sources: those
    are read by the rule sandbox, with the reader role's job-scoped credentials)."""
    fn.add_to_role_policy(
        iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{trial_prefix}*")])
    )
    allow_trial_listing(fn, bucket=bucket, trial_prefix=trial_prefix)


def allow_trial_listing(fn: lambda_.Function, *, bucket: s3.IBucket, trial_prefix: str) -> None:
    """ListBucket under the trial prefix only (how many steps a trial holds at the end of training)."""
    fn.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{trial_prefix}*"]}},
        )
    )


def allow_stop_signals(fn: lambda_.Function, *, bucket: s3.IBucket, trial_prefix: str) -> None:
    """PutObject of a trial's stop-signal file (the ``stoptraining`` action) and of its capture requests
    (the ``capture`` action: ``tornasole_capture/<digest>.json``), nothing else."""
    fn.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:PutObject"],
            resources=[bucket.arn_for_objects(f"{trial_prefix}*{STOP_SIGNAL_FILE}")],
        )
    )
    fn.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:PutObject"],
            resources=[bucket.arn_for_objects(f"{trial_prefix}*{CAPTURE_REQUESTS_DIR}/*.json")],
        )
    )


def allow_reports(fn: lambda_.Function, *, bucket: s3.IBucket, trial_prefix: str) -> None:
    """PutObject of a trial's HTML report (written by completion when a job ends), nothing else."""
    fn.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:PutObject"],
            resources=[bucket.arn_for_objects(f"{trial_prefix}*{REPORT_FILE}")],
        )
    )


def allow_rule_sandbox(fn: lambda_.Function, *, sandbox: lambda_.IFunction, reader: iam.IRole) -> None:
    """Run custom rules in the sandbox: ``sts:AssumeRole`` of its reader role (with a session policy
    scoping it to one job) and ``lambda:InvokeFunction`` of the sandbox function, nothing else."""
    fn.add_to_role_policy(iam.PolicyStatement(actions=["sts:AssumeRole"], resources=[reader.role_arn]))
    fn.add_to_role_policy(
        iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[sandbox.function_arn])
    )

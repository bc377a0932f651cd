"""The rule sandbox: the function custom rules run in, and the role their job-scoped credentials come from.

Why its own function: a custom rule is a user's code. In the evaluator it would run with the
evaluator's role (state table writes, events, stop signals) and could read every job's trial. Here:

* the sandbox function's execution role may write its own log group and nothing else: no S3, no
  table, no events (it is invoked synchronously by the evaluator and has no trigger);
* the reader role, assumable only by the evaluator's roles, may read the trial prefix and the rule
  prefix. The evaluator assumes it for each rule run with an inline session policy narrowing it to
  that job's trial and that rule file (``tornasole.evaluator.sandbox_policy``), and hands the
  resulting 15-minute credentials to the sandbox, which signs every S3 call with them only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from tornasole.stack_spec import FunctionSpec

__all__ = ["RuleSandbox"]

_NOT_SHIPPED = ["**/__pycache__", "**/*.pyc"]


class RuleSandbox(Construct):
    """The ``custom_rule`` function (:attr:`function`) and the reader role (:attr:`reader`)."""

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        spec: FunctionSpec,
        layer: lambda_.ILayerVersion,
        runtime: lambda_.Runtime,
        architecture: lambda_.Architecture,
        functions_root: Path,
        environment: Mapping[str, str],
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
        callers: Sequence[iam.IRole],
        bucket: s3.IBucket,
        trial_prefix: str,
        rules_bucket: s3.IBucket,
        rules_prefix: str,
    ) -> None:
        super().__init__(scope, id_)
        log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=removal_policy)
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Tornasole rule sandbox: its own logs, no data access",
        )
        log_group.grant_write(role)
        self.function = lambda_.Function(
            self,
            spec.id,
            runtime=runtime,
            architecture=architecture,
            handler=spec.handler,
            code=lambda_.Code.from_asset(
                str(functions_root / Path(spec.asset_dir).name), exclude=_NOT_SHIPPED
            ),
            layers=[layer],
            memory_size=spec.memory_mb,
            timeout=Duration.seconds(spec.timeout_s),
            description=spec.description,
            environment=dict(environment),
            role=role,
            log_group=log_group,
        )
        self.reader = iam.Role(
            self,
            "Reader",
            assumed_by=iam.CompositePrincipal(*(iam.ArnPrincipal(r.role_arn) for r in callers)),
            description="Tornasole rule sandbox: reads of trials and rule files, narrowed per job by "
            "the evaluator's session policy",
            max_session_duration=Duration.hours(1),
        )
        self.reader.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[
                    bucket.arn_for_objects(f"{trial_prefix}*"),
                    rules_bucket.arn_for_objects(f"{rules_prefix}*"),
                ],
            )
        )
        self.reader.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{trial_prefix}*"]}},
            )
        )

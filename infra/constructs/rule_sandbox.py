"""The rule sandbox: the function custom rules run in, and the role their job-scoped credentials come from.

Why its own function: a custom rule is a user's code. In the evaluator it would run with the
evaluator's role (state table writes, events, stop signals) and could read every job's trial. Here:

* the sandbox function's execution role may write its own log group and nothing else: no S3, no
  table, no events (it is invoked synchronously by the evaluator and has no trigger);
* the reader role, assumable only by the evaluator's roles, may read the trial prefix and the rule
  prefix. The evaluator assumes it for each rule run with an inline session policy narrowing it to
  that job's trial and that rule file (``tornasole.evaluator.sandbox.session_policy``), and hands the
  resulting 15-minute credentials to the sandbox, which signs every S3 call with them only;
* the function runs in a VPC of its own with no route out but an S3 gateway endpoint (no internet
  gateway, no NAT: nothing to pay for), whose policy lets through only reads of the trial and rule
  buckets: a rule cannot send what it reads anywhere, not even to a bucket of its author's. Its
  security group admits nothing in and HTTPS out (the routes decide where "out" can reach). What
  remains (DNS queries to the VPC's resolver) is in ``docs/SECURITY.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from tornasole.stack_spec import FunctionSpec

__all__ = ["RuleSandbox"]

_NOT_SHIPPED = ["**/__pycache__", "**/*.pyc"]
#: What Lambda needs to attach the function to its subnets (the AWSLambdaVPCAccessExecutionRole
#: managed policy's actions, granted inline so the role holds nothing else managed).
_ENI_ACTIONS = [
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
]
_ENI_REASON = (
    "Lambda creates and deletes the function's network interfaces in its subnets with these "
    "actions, which support no resource-level scoping (AWSLambdaVPCAccessExecutionRole grants them on * "
    "too); a rule's process never holds the role's credentials (they are scrubbed from its environment)."
)


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
        flow_log: bool = True,
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
        self.vpc, self.security_group = self._network(
            bucket, rules_bucket, log_retention, removal_policy, flow_log
        )
        eni = iam.Policy(
            self,
            "NetworkInterfaces",
            statements=[iam.PolicyStatement(actions=_ENI_ACTIONS, resources=["*"])],
        )
        role.attach_inline_policy(eni)
        cdk.Validations.of(eni).acknowledge(
            cdk.Acknowledgment(id="AwsSolutions-IAM5[Resource::*]", reason=_ENI_REASON)
        )
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
            vpc=self.vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
            security_groups=[self.security_group],
        )
        self.function.node.add_dependency(eni)  # the ENIs are made at deployment, with the role's grant
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

    def _network(
        self,
        bucket: s3.IBucket,
        rules_bucket: s3.IBucket,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
        flow_log: bool,
    ) -> tuple[ec2.Vpc, ec2.SecurityGroup]:
        """Isolated subnets, an S3 gateway endpoint for the two buckets' reads, rejected flows logged."""
        vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="isolated", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24
                )
            ],
            restrict_default_security_group=False,  # unused; restricting it deploys a custom resource
        )
        endpoint = vpc.add_gateway_endpoint(
            "S3",
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
        )
        endpoint.add_to_policy(
            iam.PolicyStatement(
                principals=[iam.AnyPrincipal()],
                actions=["s3:GetObject", "s3:ListBucket"],
                resources=[
                    bucket.bucket_arn,
                    bucket.arn_for_objects("*"),
                    rules_bucket.bucket_arn,
                    rules_bucket.arn_for_objects("*"),
                ],
            )
        )
        if not flow_log:  # sandbox_flow_log=false: the deployer chose a target that cannot create one
            cdk.Validations.of(vpc).acknowledge(
                cdk.Acknowledgment(
                    id="AwsSolutions-VPC7",
                    reason="sandbox_flow_log=false: the target (MiniStack) cannot create AWS::EC2::FlowLog; "
                    "every AWS deployment keeps the default, a log of rejected flows",
                )
            )
        else:
            flow_logs = logs.LogGroup(
                self, "RejectedFlows", retention=log_retention, removal_policy=removal_policy
            )
            vpc.add_flow_log(
                "Rejected",
                destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
                traffic_type=ec2.FlowLogTrafficType.REJECT,
            )
        group = ec2.SecurityGroup(
            self,
            "Function",
            vpc=vpc,
            description="Tornasole rule sandbox: nothing in; HTTPS out, routed to the S3 endpoint only",
            allow_all_outbound=False,
        )
        group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "S3 through the gateway endpoint")
        return vpc, group

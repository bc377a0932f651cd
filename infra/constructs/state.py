"""The evaluator's single state table (design in ``tornasole.evaluator.store.state_table``; names in
``stack_spec``)."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as ddb
from constructs import Construct

from tornasole.stack_spec import TableSpec

__all__ = ["StateTable"]


class StateTable(Construct):
    """On-demand table with point-in-time recovery, a TTL attribute and a NEW_IMAGE stream.

    The stream feeds the outbox publisher (``functions/publish_events``); the sparse GSI lets the
    scheduled check read only what needs attention.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        spec: TableSpec,
        table_name: str | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id_)
        string = ddb.AttributeType.STRING
        self.table = ddb.Table(
            self,
            "Table",
            table_name=table_name or spec.name,
            partition_key=ddb.Attribute(name=spec.partition_key, type=string),
            sort_key=ddb.Attribute(name=spec.sort_key, type=string),
            billing_mode=ddb.BillingMode[spec.billing_mode],
            point_in_time_recovery_specification=ddb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=spec.ttl_attribute,
            stream=ddb.StreamViewType[spec.stream_view_type],
            removal_policy=removal_policy,
        )
        self.table.add_global_secondary_index(
            index_name=spec.gsi.name,
            partition_key=ddb.Attribute(name=spec.gsi.partition_key, type=string),
            sort_key=ddb.Attribute(name=spec.gsi.sort_key, type=string),
            projection_type=ddb.ProjectionType[spec.gsi.projection],
        )

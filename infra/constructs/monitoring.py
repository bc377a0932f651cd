"""Alarms: a failed evaluation or a stuck outbox must reach a person, not just a log line."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

__all__ = ["Monitoring"]


class Monitoring(Construct):
    """One alarm per function on errors, one on parked failures, one on the outbox stream's age.

    All of them notify ``topic``; missing data is "not breaching" (no traffic is healthy).
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        functions: tuple[lambda_.Function, ...],
        failures: sqs.IQueue,
        stream_consumer: lambda_.Function,
        topic: sns.ITopic,
    ) -> None:
        super().__init__(scope, id_)
        action = cw_actions.SnsAction(topic)
        self.alarms: list[cw.Alarm] = []
        for fn in functions:
            self._alarm(
                fn.node.id + "Errors",
                fn.metric_errors(period=Duration.minutes(5), statistic="Sum"),
                threshold=1,
                description=f"Tornasole {fn.node.id}: invocations failed (see its log group)",
            )
        self._alarm(
            "FailuresParked",
            failures.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(5), statistic="Max"
            ),
            threshold=1,
            description="Tornasole: events parked in the failure queue (inspect and redrive)",
        )
        self._alarm(
            "OutboxStreamAge",
            stream_consumer.metric("IteratorAge", period=Duration.minutes(5), statistic="Maximum"),
            threshold=Duration.minutes(15).to_milliseconds(),
            description="Tornasole: events are waiting more than 15 minutes to be published",
        )
        for alarm in self.alarms:
            alarm.add_alarm_action(action)

    def _alarm(self, id_: str, metric: cw.IMetric, *, threshold: float, description: str) -> None:
        self.alarms.append(
            cw.Alarm(
                self,
                id_,
                metric=metric,
                threshold=threshold,
                evaluation_periods=1,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                alarm_description=description,
            )
        )

"""Alerts: who hears about rule findings, and how.

Two SNS topics, because SNS cannot filter what EventBridge delivers (EventBridge sets no message
attributes, and an attribute filter policy never matches a message without attributes):

* ``actions`` (``stack_spec`` topic name): the evaluator publishes ``email`` / ``sms`` actions from
  a rule's ``action_json`` here with the ``tornasole_action`` / ``tornasole_endpoint`` attributes; each
  context e-mail address is subscribed with a filter policy so it only receives actions naming it.
* ``status``: an EventBridge rule sends every job state change with a rule in ``IssuesFound`` or
  ``Error`` here as a readable sentence (input transformer); every context address receives them,
  as do the stack's alarms.
"""

from __future__ import annotations

from aws_cdk import Annotations
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from tornasole.stack_spec import DETAIL_TYPE_JOB_STATE_CHANGE, AlertSpec

__all__ = ["Alerts", "ALERT_STATUSES"]

ALERT_STATUSES = ("IssuesFound", "Error")


class Alerts(Construct):
    """The two topics, their e-mail subscriptions, and the bus rule(s) that feed them."""

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        spec: AlertSpec,
        bus: events.IEventBus,
        source: str,
        emails: tuple[str, ...],
        failures: sqs.IQueue,
        alert_lambda_arn: str | None = None,
    ) -> None:
        super().__init__(scope, id_)
        # Messages name jobs, rules, e-mail addresses and phone numbers: encrypted at rest with a key
        # of the stack (rotated yearly). Publishers get kms:GenerateDataKey*/Decrypt through
        # grant_publish; CloudWatch alarms publish to the status topic, so its service may use the key.
        self.key = kms.Key(
            self,
            "TopicsKey",
            description="Tornasole: encrypts the alert topics' messages at rest",
            enable_key_rotation=True,
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublishToTheStatusTopic",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" is this key
            )
        )
        self.actions_topic = sns.Topic(
            self,
            "Actions",
            topic_name=spec.topic_name,
            display_name="Tornasole rule actions",
            enforce_ssl=True,
            master_key=self.key,
        )
        self.status_topic = sns.Topic(
            self,
            "Status",
            topic_name=f"{spec.topic_name}-status",
            display_name="Tornasole alerts",
            enforce_ssl=True,
            master_key=self.key,
        )
        for address in emails:
            self.actions_topic.add_subscription(
                subs.EmailSubscription(
                    address,
                    dead_letter_queue=failures,
                    filter_policy={
                        spec.attr_action: sns.SubscriptionFilter.string_filter(allowlist=["email"]),
                        spec.attr_endpoint: sns.SubscriptionFilter.string_filter(allowlist=[address]),
                    },
                )
            )
            self.status_topic.add_subscription(subs.EmailSubscription(address, dead_letter_queue=failures))

        self.pattern = events.EventPattern(
            source=[source],
            detail_type=[DETAIL_TYPE_JOB_STATE_CHANGE],
            detail={"DebugRuleEvaluationStatuses": {"RuleEvaluationStatus": list(ALERT_STATUSES)}},
        )
        job = events.EventField.from_path("$.detail.TrainingJobName")
        message = events.RuleTargetInput.from_text(
            f"Tornasole: training job {job} ({events.EventField.from_path('$.detail.TrainingJobStatus')}) "
            f"has a rule in IssuesFound or Error. Rule statuses: "
            f"{events.EventField.from_path('$.detail.DebugRuleEvaluationStatuses')}. "
            f"Details: `tornasole jobs status {job}`."
        )
        self.issues_rule = events.Rule(
            self,
            "IssuesToStatusTopic",
            event_bus=bus,
            event_pattern=self.pattern,
            description="Tornasole: rule IssuesFound/Error transitions -> status topic (readable message)",
            targets=[
                # A role of this rule publishes, instead of a topic policy letting the whole
                # events.amazonaws.com service principal publish (with no aws:SourceArn condition).
                targets.SnsTopic(
                    self.status_topic,
                    message=message,
                    dead_letter_queue=failures,
                    retry_attempts=4,
                    authorize_using_role=True,
                )
            ],
        )
        if alert_lambda_arn:
            user_fn = lambda_.Function.from_function_attributes(
                self, "UserAlertFunction", function_arn=alert_lambda_arn, same_environment=True
            )
            user_rule = events.Rule(
                self,
                "IssuesToUserFunction",
                event_bus=bus,
                event_pattern=self.pattern,
                description="Tornasole: rule IssuesFound/Error transitions -> your function (the full event)",
                targets=[targets.LambdaFunction(user_fn, dead_letter_queue=failures, retry_attempts=4)],
            )
            Annotations.of(user_rule).acknowledge_warning(
                "@aws-cdk/aws-events:ruleUnresolvedEnvironment",
                "The stack is environment-agnostic; the function is declared same-environment (same account "
                "and region as the deployment), which is what the Lambda permission needs.",
            )

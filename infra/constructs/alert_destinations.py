"""Alert destinations: webhooks (EventBridge API destinations) and chat channels (AWS Chatbot).

The evaluator puts one ``Tornasole Alert`` event on the project's bus per alert of a
``webhook:``/``slack:``/``teams:`` action (after the reminder gate), with ``detail.Destination`` naming
it. Here each configured destination gets its own bus rule matching exactly its name, so delivery,
retries (``RetryPolicy``) and the dead-letter queue are EventBridge's own, and nothing in a job's
configuration can reach an endpoint the operator did not configure:

* a webhook: rule -> API destination (HTTPS POST of the body its ``format`` selects) through a
  connection whose credential is a dynamic reference to the operator's Secrets Manager secret (never
  inlined in the template; EventBridge keeps its copy in a secret of its own);
* a Slack or Teams channel: rule -> an SNS topic of its own (encrypted with the alerts' key) carrying
  the AWS Chatbot custom notification -> the Chatbot channel configuration, whose role has no
  permissions and whose guardrail is ``AWSDenyAll``: the channel receives alerts, nobody can run
  AWS commands from it.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_chatbot as chatbot
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.alert_config import SlackChannel, TeamsChannel, Webhook
from tornasole.alerts.destinations import DETAIL_TYPE_ALERT, FORMATS

__all__ = ["AlertDestinations", "DENY_ALL_GUARDRAIL", "RETRY_ATTEMPTS", "MAX_EVENT_AGE"]

#: EventBridge's own retries of a failed delivery (then the dead-letter queue).
RETRY_ATTEMPTS = 8
MAX_EVENT_AGE = cdk.Duration.hours(2)
#: The Chatbot channels' guardrail: no AWS action can be run from the chat channel.
DENY_ALL_GUARDRAIL = "AWSDenyAll"


def _logical(name: str) -> str:
    """A construct id from a destination name (letters and digits, readable)."""
    return "".join(part.capitalize() for part in name.replace(".", "-").replace("_", "-").split("-"))


class AlertDestinations(Construct):
    """One bus rule per destination; API destinations for webhooks, Chatbot for Slack/Teams."""

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        bus: events.IEventBus,
        source: str,
        key: kms.IKey,
        failures: sqs.IQueue,
        webhooks: tuple[Webhook, ...],
        slack_channels: tuple[SlackChannel, ...],
        teams_channels: tuple[TeamsChannel, ...],
    ) -> None:
        super().__init__(scope, id_)
        self._bus, self._source, self._failures = bus, source, failures
        self.rules: dict[str, events.Rule] = {}
        self.api_destinations: dict[str, events.ApiDestination] = {}
        self.chat_topics: dict[str, sns.Topic] = {}
        for hook in webhooks:
            self._webhook(hook)
        chat_role = None
        if slack_channels or teams_channels:
            # Chatbot assumes it to post notifications; it is given no permissions at all.
            chat_role = iam.Role(
                self,
                "ChatRole",
                assumed_by=iam.ServicePrincipal("chatbot.amazonaws.com"),
                description="Tornasole: AWS Chatbot channels that receive alerts (no permissions)",
            )
            self.guardrail = iam.ManagedPolicy.from_aws_managed_policy_name(DENY_ALL_GUARDRAIL)
        for channel in slack_channels:
            topic = self._chat_topic(f"slack:{channel.name}", key)
            chatbot.SlackChannelConfiguration(
                self,
                f"Slack{_logical(channel.name)}",
                slack_channel_configuration_name=f"tornasole-{channel.name}"[:128],
                slack_workspace_id=channel.workspace_id,
                slack_channel_id=channel.channel_id,
                notification_topics=[topic],
                role=chat_role,
                guardrail_policies=[self.guardrail],
            )
        for channel in teams_channels:
            topic = self._chat_topic(f"teams:{channel.name}", key)
            assert chat_role is not None
            chatbot.CfnMicrosoftTeamsChannelConfiguration(
                self,
                f"Teams{_logical(channel.name)}",
                configuration_name=f"tornasole-{channel.name}"[:128],
                iam_role_arn=chat_role.role_arn,
                team_id=channel.team_id,
                teams_channel_id=channel.channel_id,
                teams_tenant_id=channel.tenant_id,
                sns_topic_arns=[topic.topic_arn],
                guardrail_policies=[self.guardrail.managed_policy_arn],
                logging_level="NONE",
            )

    def pattern(self, destination: str) -> events.EventPattern:
        """The alert events of one destination (``detail.Destination``)."""
        return events.EventPattern(
            source=[self._source], detail_type=[DETAIL_TYPE_ALERT], detail={"Destination": [destination]}
        )

    def _rule(self, destination: str, target: events.IRuleTarget, construct_id: str) -> events.Rule:
        rule = events.Rule(
            self,
            construct_id,
            event_bus=self._bus,
            event_pattern=self.pattern(destination),
            description=f"Tornasole: alerts of {destination}"[:512],
            targets=[target],
        )
        self.rules[destination] = rule
        return rule

    def _webhook(self, hook: Webhook) -> None:
        cid = f"Webhook{_logical(hook.name)}"
        secret = cdk.SecretValue.secrets_manager(hook.secret_arn, json_field="token")
        connection = events.Connection(
            self,
            f"{cid}Connection",
            authorization=events.Authorization.api_key(hook.header, secret),
            description=f"Tornasole webhook {hook.name}: credential from the operator's secret",
        )
        # A URL that is itself a credential (a Slack incoming webhook) is resolved at deployment from
        # the secret's "url" field: the template holds the reference, not the URL.
        endpoint = (
            hook.url or cdk.SecretValue.secrets_manager(hook.secret_arn, json_field="url").unsafe_unwrap()
        )
        destination = events.ApiDestination(
            self,
            f"{cid}Destination",
            connection=connection,
            endpoint=endpoint,
            http_method=events.HttpMethod.POST,
            rate_limit_per_second=hook.rate_per_second,
            description=f"Tornasole webhook {hook.name} ({hook.format} body)",
        )
        self.api_destinations[hook.name] = destination
        body = events.RuleTargetInput.from_event_path(f"$.detail.{FORMATS[hook.format]}")
        target = targets.ApiDestination(
            destination,
            event=body,
            dead_letter_queue=self._failures,
            retry_attempts=RETRY_ATTEMPTS,
            max_event_age=MAX_EVENT_AGE,
        )
        self._rule(f"webhook:{hook.name}", target, cid)

    def _chat_topic(self, destination: str, key: kms.IKey) -> sns.Topic:
        kind, _, name = destination.partition(":")
        cid = f"{kind.capitalize()}{_logical(name)}"
        topic = sns.Topic(
            self,
            f"{cid}Topic",
            display_name=f"Tornasole alerts for {destination}"[:100],
            enforce_ssl=True,
            master_key=key,
        )
        self.chat_topics[destination] = topic
        target = targets.SnsTopic(
            topic,
            message=events.RuleTargetInput.from_event_path(f"$.detail.{FORMATS['chatbot']}"),
            dead_letter_queue=self._failures,
            retry_attempts=RETRY_ATTEMPTS,
            max_event_age=MAX_EVENT_AGE,
            authorize_using_role=True,
        )
        self._rule(destination, target, f"{cid}Rule")
        return topic

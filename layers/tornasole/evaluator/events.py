"""Drain the transactional outbox: EventBridge events, SNS alerts, stop signals.

Exactly-once, as a subscriber sees it (EVENTS.md): a transition and its outbox
item are written in one DynamoDB transaction (``tornasole.evaluator.transitions``),
so an item exists iff the change happened. This module delivers each item at
least once (the state table's stream invokes ``publish_events`` on every
outbox insert; the scheduled check re-drives items older than a grace period)
and then marks it ``published`` under a condition. If a Lambda dies after
PutEvents but before the mark, the item is delivered again with the same
``detail.TornasoleEventId``: consumers dedupe on it. A partial PutEvents
failure (``FailedEntryCount > 0``) is a failure: the item stays unpublished and
the invocation fails so it is retried.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from tornasole.evaluator.state import Conflict, StateTable
from tornasole.exceptions import TornasoleError
from tornasole.stack_spec import ALERT_ATTR_ACTION, ALERT_ATTR_ENDPOINT, ALERT_ATTR_JOB, DEFAULT_SPEC

if TYPE_CHECKING:
    from tornasole.lambda_support.env import HandlerEnv

__all__ = ["OutboxPublisher", "PublishError", "REDRIVE_GRACE_MS"]

log = logging.getLogger(__name__)

# The stream normally publishes within seconds; the schedule re-drives only items older than this.
REDRIVE_GRACE_MS = 60_000


class PublishError(TornasoleError):
    """An outbox item could not be delivered (it stays unpublished and is retried)."""


class OutboxPublisher:
    """Delivers outbox items of the state table.

    Examples
    --------
    >>> pub = OutboxPublisher(StateTable("tornasole-state"), bus_name="tornasole")  # doctest: +SKIP
    >>> pub.redrive(now_ms=...)                                                     # doctest: +SKIP
    """

    def __init__(
        self,
        table: StateTable,
        bus_name: str = DEFAULT_SPEC.bus.name,
        source: str = DEFAULT_SPEC.bus.source,
        alert_topic_arn: str | None = None,
        events_client: Any = None,
        sns_client: Any = None,
    ) -> None:
        self.table = table
        self.bus_name = bus_name
        self.source = source
        self.alert_topic_arn = alert_topic_arn
        self._events = events_client
        self._sns = sns_client

    @classmethod
    def from_env(cls, env: HandlerEnv) -> OutboxPublisher:
        return cls(StateTable(env.state_table), env.event_bus, env.event_source, env.alert_topic_arn)

    @property
    def events(self) -> Any:
        if self._events is None:
            from tornasole.aws.clients import events_client

            return events_client()
        return self._events

    @property
    def sns(self) -> Any:
        if self._sns is None:
            from tornasole.aws.clients import sns_client

            return sns_client()
        return self._sns

    # -- stream entry point ------------------------------------------------------------------
    def is_outbox_key(self, keys: dict[str, Any]) -> bool:
        return str(keys.get(self.table.spec.sort_key, "")).startswith("OUTBOX#")

    def publish(self, keys: dict[str, Any]) -> bool:
        """Deliver the outbox item with these keys unless already published; True if delivered now."""
        pk, sk = str(keys[self.table.spec.partition_key]), str(keys[self.table.spec.sort_key])
        item = self.table.get(pk, sk)
        if item is None or "published" in item:
            return False
        self.deliver(item)
        try:
            self.table.update(
                pk,
                sk,
                "SET published = :now REMOVE gsi1pk, gsi1sk",
                {":now": _now_ms()},
                condition="outbox_unpublished",
            )
        except Conflict:
            log.info("outbox item already marked published by a concurrent publisher", extra={"item": sk})
        return True

    def redrive(self, now_ms: int, grace_ms: int = REDRIVE_GRACE_MS) -> int:
        """Publish unpublished items older than ``grace_ms`` (the sparse OUTBOX index): returns how many."""
        done = 0
        for item in self.table.query("OUTBOX", "", index=True):
            if int(item.get("created", 0)) > now_ms - grace_ms:
                continue
            try:
                done += self.publish(item)
            except PublishError as exc:
                log.error("re-drive failed: %s", exc, extra={"item": item.get("sk")})
        return done

    def unpublished(self) -> list[dict[str, Any]]:
        return self.table.query("OUTBOX", "", index=True)

    # -- delivery ----------------------------------------------------------------------------
    def deliver(self, item: dict[str, Any]) -> None:
        payload = json.loads(item["payload"])
        kind = item["kind"]
        if kind == "event":
            self._put_event(payload)
        elif kind == "alert":
            self._alert(payload)
        elif kind == "stop":
            self._stop_signal(payload)
        else:
            raise PublishError(f"outbox item {item['sk']}: unknown kind {kind!r}")

    def _put_event(self, payload: dict[str, Any]) -> None:
        entry = {
            "Source": self.source,
            "DetailType": payload["detail_type"],
            "Detail": json.dumps(payload["detail"], sort_keys=True),
            "Resources": payload.get("resources", []),
            "EventBusName": self.bus_name,
        }
        resp = self.events.put_events(Entries=[entry])
        if resp.get("FailedEntryCount", 0) > 0:
            failed = [e for e in resp.get("Entries", []) if e.get("ErrorCode")]
            raise PublishError(f"PutEvents to bus {self.bus_name} failed: {failed}")

    def _alert(self, payload: dict[str, Any]) -> None:
        if not self.alert_topic_arn:
            raise PublishError("an email/sms action fired but TORNASOLE_ALERT_TOPIC_ARN is not set")
        attrs = {
            ALERT_ATTR_ACTION: payload["action"],
            ALERT_ATTR_ENDPOINT: payload.get("endpoint") or "",
            ALERT_ATTR_JOB: payload.get("job") or "",
        }
        self.sns.publish(
            TopicArn=self.alert_topic_arn,
            Subject=payload["subject"][:100],
            Message=payload["message"],
            MessageAttributes={k: {"DataType": "String", "StringValue": v} for k, v in attrs.items() if v},
        )

    @staticmethod
    def _stop_signal(payload: dict[str, Any]) -> None:
        from tornasole.storage import get_storage

        body = json.dumps(payload["body"], sort_keys=True).encode()
        get_storage(payload["path"]).write_atomic(payload["path"], body)


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)

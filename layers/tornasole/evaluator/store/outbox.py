"""The transactional outbox, writing and publishing: EventBridge events, alerts, stop signals, capture
requests.

Alerts (``tornasole.alerts``): email/sms go to the actions topic (SNS) as text; webhook/slack/teams go
out as one ``Tornasole Alert`` event on the bus, which the stack routes by destination. Both pass the
action's reminder gate first.

Writing (``outbox_put``): a transition and its outbox item are written in one
DynamoDB transaction (``tornasole.evaluator.store.transitions``), so an item exists
iff the change happened. Event payloads are fitted to EventBridge's entry limit
here, before they are stored (``events.fit_event``).

Publishing: the state table's stream invokes ``publish_events`` on every
outbox insert, and the scheduled check re-drives items older than a grace
period, so the two can overlap. Each delivery therefore starts with a
*conditional claim* on the row (``outbox_claimable``: not published, and not
claimed, or claimed longer ago than any publisher can run): only the winner
delivers, then marks the row ``published`` (and sets its TTL, so published rows
expire) under ``outbox_claim_held``. A failed delivery releases the claim and
raises, so the item is retried. Only a publisher dying between PutEvents and
the mark can deliver twice (after its claim goes stale), with the same
``detail.TornasoleEventId`` the consumer dedupes on. A partial PutEvents failure
(``FailedEntryCount > 0``) is a failure.

The re-drive handles each item on its own: one undeliverable item is logged and
left for later, the others still go out.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tornasole.alerts.destinations import DETAIL_TYPE_ALERT
from tornasole.evaluator.store.event_entries import PublishError, check_entry, fit_event
from tornasole.evaluator.store.keys import (
    OUTBOX,
    OUTBOX_PREFIX,
    alert_gate_sk,
    item,
    job_pk,
    outbox_gsi_sk,
    outbox_sk,
)
from tornasole.evaluator.store.state_table import Conflict, StateTable
from tornasole.stack_spec import ALERT_ATTR_ACTION, ALERT_ATTR_ENDPOINT, ALERT_ATTR_JOB, DEFAULT_SPEC

if TYPE_CHECKING:
    from tornasole.evaluator.handler_env import HandlerEnv

__all__ = [
    "CLAIM_TIMEOUT_MS",
    "OutboxItem",
    "OutboxPublisher",
    "PUBLISHED_TTL_S",
    "PublishError",
    "REDRIVE_GRACE_MS",
    "outbox_put",
]

log = logging.getLogger(__name__)

# The stream normally publishes within seconds; the schedule re-drives only items older than this.
REDRIVE_GRACE_MS = 60_000
# A claim older than this was abandoned (its publisher died): longer than any publisher can run.
CLAIM_TIMEOUT_MS = 2000 * max(DEFAULT_SPEC.publish_events.timeout_s, DEFAULT_SPEC.scheduled_check.timeout_s)
# Published rows are kept this long (for ``tornasole jobs status`` and debugging), then expire by TTL.
PUBLISHED_TTL_S = 7 * 24 * 3600


@dataclass(frozen=True)
class OutboxItem:
    """A side effect delivered after the commit: ``event`` (EventBridge), ``alert`` (SNS or the bus),
    ``stop`` and ``capture`` (a file next to the job's output)."""

    event_id: str
    kind: str
    payload: dict[str, Any]


def outbox_put(table: StateTable, job: str, entry: OutboxItem, now_ms: int) -> dict[str, Any]:
    """The transaction entry inserting one outbox item (``outbox_is_new``); events fitted to EventBridge."""

    payload = fit_event(entry.payload, job) if entry.kind == "event" else entry.payload
    gsi = table.spec.gsi
    row = item(
        job_pk(job),
        outbox_sk(entry.event_id),
        kind=entry.kind,
        payload=json.dumps(payload, sort_keys=True),
        created=now_ms,
    )
    row[gsi.partition_key] = OUTBOX
    row[gsi.sort_key] = outbox_gsi_sk(now_ms, entry.event_id)
    return {"Put": table.put_args(row, "outbox_is_new")}


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
        return str(keys.get(self.table.spec.sort_key, "")).startswith(OUTBOX_PREFIX)

    def claim(self, pk: str, sk: str, now_ms: int) -> tuple[str, dict[str, Any]] | None:
        """Claim the item for delivery: ``(claim id, item)``, or None (published, or claimed by another)."""
        claim = uuid.uuid4().hex
        try:
            row = self.table.update(
                pk,
                sk,
                "SET claimed = :now, claim_id = :claim",
                {":now": now_ms, ":claim": claim, ":stale": now_ms - CLAIM_TIMEOUT_MS},
                condition="outbox_claimable",
                return_new=True,
            )
        except Conflict:
            return None
        return claim, row or {}

    def publish(self, keys: dict[str, Any]) -> bool:
        """Deliver the outbox item with these keys unless published or claimed; True if delivered now."""
        pk, sk = str(keys[self.table.spec.partition_key]), str(keys[self.table.spec.sort_key])
        now = _now_ms()
        claimed = self.claim(pk, sk, now)
        if claimed is None:
            return False
        claim, row = claimed
        gsi = self.table.spec.gsi
        try:
            self.deliver(row)
        except BaseException:
            try:  # let the next attempt (stream retry, re-drive) have it at once
                self.table.update(
                    pk, sk, "REMOVE claimed, claim_id", {":claim": claim}, condition="outbox_claim_held"
                )
            except Exception:  # noqa: BLE001 - the claim then goes stale; the delivery error matters
                log.warning("could not release the outbox claim", extra={"item": sk}, exc_info=True)
            raise
        try:
            self.table.update(
                pk,
                sk,
                "SET published = :now, expires_at = :ttl REMOVE claimed, #gp, #gs",
                {":now": _now_ms(), ":ttl": _now_ms() // 1000 + PUBLISHED_TTL_S, ":claim": claim},
                condition="outbox_claim_held",
                names={"#gp": gsi.partition_key, "#gs": gsi.sort_key},
            )
        except Conflict:
            log.warning("outbox claim lost before the published mark", extra={"item": sk})
        return True

    def redrive(self, now_ms: int, grace_ms: int = REDRIVE_GRACE_MS) -> int:
        """Publish unpublished items older than ``grace_ms`` (the sparse OUTBOX index), each on its own:
        returns how many were delivered now; a failing item is logged and left for the next run."""
        done = 0
        for row in self.unpublished():
            if int(row.get("created", 0)) > now_ms - grace_ms:
                continue
            try:
                done += self.publish(row)
            except Exception as exc:  # noqa: BLE001 - one undeliverable item must not stop the others
                log.error("re-drive failed: %s", exc, extra={"item": row.get(self.table.spec.sort_key)})
        return done

    def unpublished(self) -> list[dict[str, Any]]:
        return self.table.query(OUTBOX, "", index=True)

    # -- delivery ----------------------------------------------------------------------------
    def deliver(self, item: dict[str, Any]) -> None:
        payload = json.loads(item["payload"])
        kind = item["kind"]
        if kind == "event":
            self._put_event(payload)
        elif kind == "alert":
            gate = self._alert_gate(payload, str(item.get(self.table.spec.sort_key, "")))
            if gate is not None:
                self._alert(payload, reminder=gate)
        elif kind in ("stop", "capture"):  # a file next to the job's output, which its hook polls
            self._stop_signal(payload)
        else:
            raise PublishError(f"outbox item {item.get(self.table.spec.sort_key)}: unknown kind {kind!r}")

    def _put_event(self, payload: dict[str, Any]) -> None:

        entry = {
            "Source": self.source,
            "DetailType": payload["detail_type"],
            "Detail": json.dumps(payload["detail"], sort_keys=True),
            "Resources": payload.get("resources", []),
            "EventBusName": self.bus_name,
        }
        check_entry(entry)
        resp = self.events.put_events(Entries=[entry])
        if resp.get("FailedEntryCount", 0) > 0:
            failed = [e for e in resp.get("Entries", []) if e.get("ErrorCode")]
            raise PublishError(f"PutEvents to bus {self.bus_name} failed: {failed}")

    def _alert_gate(self, payload: dict[str, Any], item_id: str) -> bool | None:
        """Whether this alert may go out: None when not, else whether it is a reminder.

        It may go out as the action's first message, or as a reminder once its interval
        (``reminder_ms``) has passed since the last one sent. One conditional write per alert, so two
        publishers racing send one message; a retried item (its send failed) passes its own gate again,
        and is a reminder only if another item went first (``first_by``). A skipped alert is published
        all the same: the issue event carried the firing."""
        gate, job = payload.get("gate"), payload.get("job")
        if not gate or not job:
            return False  # written before reminders existed: sent as it was
        now, interval = _now_ms(), int(payload.get("reminder_ms", 0))
        try:
            row = self.table.update(
                job_pk(job),
                alert_gate_sk(gate),
                "SET sent_at = :now, sent_by = :me, expires_at = :ttl, "
                "first_by = if_not_exists(first_by, :me)",
                {
                    ":now": now,
                    ":me": item_id,
                    ":cutoff": now - interval,
                    ":ttl": (now + interval) // 1000 + PUBLISHED_TTL_S,
                },
                condition="alert_gate_open",
                return_new=True,
            )
        except Conflict:
            log.info("alert not sent: one went out within its reminder interval", extra={"item": item_id})
            return None
        return bool(row) and row.get("first_by") != item_id

    def _alert(self, payload: dict[str, Any], reminder: bool = False) -> None:
        body = payload.get("alert")
        if isinstance(body, dict):
            body = {**body, "Reminder": reminder}
        if payload.get("destination"):
            self._alert_event(payload["destination"], body or {})
            return
        if not self.alert_topic_arn:
            raise PublishError("an email/sms action fired but TORNASOLE_ALERT_TOPIC_ARN is not set")
        subject, message = payload["subject"], payload["message"]
        if isinstance(body, dict):
            from tornasole.alerts.render import text_message

            subject, message = text_message(body)
        attrs = {
            ALERT_ATTR_ACTION: payload["action"],
            ALERT_ATTR_ENDPOINT: payload.get("endpoint") or "",
            ALERT_ATTR_JOB: payload.get("job") or "",
        }
        self.sns.publish(
            TopicArn=self.alert_topic_arn,
            Subject=subject[:100],
            Message=message,
            MessageAttributes={k: {"DataType": "String", "StringValue": v} for k, v in attrs.items() if v},
        )

    def _alert_event(self, destination: str, body: dict[str, Any]) -> None:
        """A webhook/slack/teams alert: one event on the bus, which the stack routes by ``Destination``
        (API destination, chat topic) and the local mode POSTs; retries and dead letters are theirs."""
        from tornasole.alerts.destinations import alert_event_detail

        self._put_event(
            {
                "detail_type": DETAIL_TYPE_ALERT,
                "resources": [body["TrainingJobArn"]] if body.get("TrainingJobArn") else [],
                "detail": alert_event_detail(destination, body),
            }
        )

    @staticmethod
    def _stop_signal(payload: dict[str, Any]) -> None:
        from tornasole.storage import get_storage

        body = json.dumps(payload["body"], sort_keys=True).encode()
        get_storage(payload["path"]).write_atomic(payload["path"], body)


def _now_ms() -> int:
    return int(time.time() * 1000)

"""DynamoDB state of the serverless evaluator: ONE table, single-table design.

Key schema (names in ``tornasole.stack_spec.TableSpec``): ``pk`` (S) / ``sk`` (S),
a sparse GSI ``gsi1`` (``gsi1pk`` / ``gsi1sk``), TTL attribute ``expires_at``,
stream ``NEW_IMAGE`` (drained by ``publish_events`` for ``OUTBOX#`` inserts).

Items (``<step12>`` = the global step zero-padded to 12 digits, so keys sort by step; every key is
built by ``keys``, item sizes are checked by ``item_limits``):

``JOB#<job>`` / ``#META``
    The job: status, seq (transition counter), rules_rev, trial_path, hook_config,
    num_workers, end_marker_seen, expected_steps, steps_evaluated, last_activity,
    times, failure_reason, job_error. GSI ``ACTIVE`` / ``<job>`` while not terminal.
``JOB#<job>`` / ``#RULE#<rule>``
    One rule: config (json), status, details, issue_step, last_modified, order.
``JOB#<job>`` / ``STEP#<step12>``
    Steps seen per worker: workers (string set), first/last seen, evaluated,
    attempts (failed evaluations) and last_error; ``written#<worker>``: S3's write time (ms) of the
    worker's index file last evaluated (a later write is a rewrite: the step is evaluated again).
    GSI ``PENDING`` / ``<job>#<step12>`` while the step awaits evaluation.
``JOB#<job>`` / ``EVAL#<rule>#<step12>`` (``...@<ms>``: the step evaluated again, rewritten at <ms>)
    The (rule, step) evaluation record: fired, skipped, mode, mode_step, details,
    values (the rule's report, capped), error (the rule is broken), step_error
    (the step could not be evaluated), latency; TTL ``expires_at``.
``JOB#<job>`` / ``OUTBOX#<event id>``
    Outbox: kind (event | alert | stop), payload (json), created, claimed /
    claim_id (the publisher delivering it), published; TTL ``expires_at`` once
    published. GSI ``OUTBOX`` / ``<created ms>#<event id>`` until published.
``JOB#<job>`` / ``ALERT#<rules rev>/<rule>/<action index>``
    When that email/sms action last sent (sent_at, sent_by): reminders at most once per interval; TTL.
``JOBS`` / ``<job>``
    The registry of every job (listing jobs without a scan).
``TRIAL#<trial path>`` / ``#META``
    Trial path -> job (one job per trial).
``TRIAL#<trial path>`` / ``ORPHAN#<step12>#<worker>``
    An index file seen before its job was registered (adopted at registration; TTL).
``TRIAL#<trial path>`` / ``#ERROR``
    The last unusable ``tornasole_job.json`` (key and reason).

Access patterns, all bounded by the number of rules / workers, never by run length:
a job and its rules = one Query ``pk = JOB#j AND begins_with(sk, "#")``; a step = one
UpdateItem (``ADD workers``) returning the worker set; jobs needing a periodic look,
steps waiting for evaluation and unpublished outbox items = Queries of the sparse GSI.

Exactly-once transitions (EVENTS.md): every status change is ONE TransactWriteItems
of (job ``#META`` with ``seq = seq + 1`` guarded by the ``seq`` read, the rule item
guarded by its expected status, and an ``OUTBOX#<event id>`` insert guarded by
``attribute_not_exists``). The event id is deterministic
(``<job>:<rules_rev>:<entity>:<status>``), and statuses only move forward, so a
duplicate or concurrent attempt either finds nothing left to change or is cancelled
and re-reads. The outbox item is published later by the stream (and re-driven by
the schedule) with the same id in ``detail.TornasoleEventId``.
"""

from __future__ import annotations

import logging
from typing import Any

from tornasole.evaluator.models import JobState
from tornasole.evaluator.store.item_limits import (
    DYNAMODB_TRANSACTION_BYTES,
    ItemTooLarge,
    check_item,
    item_bytes,
)
from tornasole.evaluator.store.keys import JOB_ITEMS_PREFIX, META, job_pk, step_sk, trial_pk
from tornasole.evaluator.store.records import from_dynamo, job_state, to_dynamo
from tornasole.stack_spec import DEFAULT_SPEC, TableSpec

__all__ = ["StateTable", "Conflict", "CONDITIONS", "step_sk", "job_pk", "trial_pk"]

log = logging.getLogger(__name__)

# Every conditional write uses one of these named conditions: what each write guards against is written once.
CONDITIONS = {
    # Registration never overwrites an existing job (idempotent re-registration is decided by the caller).
    "job_is_new": "attribute_not_exists(pk)",
    # A job must exist before anything is recorded against it.
    "job_exists": "attribute_exists(pk)",
    # The job exists and its end marker is not seen yet: a step counted under this condition cannot be the
    # one that completes the job (completion waits for the end marker, whose handler then counts this step).
    "job_exists_before_end": "attribute_exists(pk) AND attribute_not_exists(end_marker_seen)",
    # A failed-registration record never replaces a registered job's registry entry.
    "registry_free_or_failed": "attribute_not_exists(pk) OR attribute_exists(failure_reason)",
    # A trial path belongs to exactly one job.
    "trial_unclaimed_or_ours": "attribute_not_exists(pk) OR job = :job",
    # Optimistic concurrency: a transition applies only to the job state it was computed from.
    "job_unchanged_since_read": "seq = :seq",
    # Statuses move forward only from the status the transition was computed from.
    "rule_in_expected_status": "#status = :from",
    # Deterministic event id: a transition / issue / alert is recorded once.
    "outbox_is_new": "attribute_not_exists(pk)",
    # One evaluation record per (rule, step): duplicates and retries find it recorded.
    "evaluation_is_new": "attribute_not_exists(pk)",
    # A step evaluated again for a rewrite of one worker's index file notes the newest write only.
    "write_is_later": "attribute_exists(evaluated) AND (attribute_not_exists(#wt) OR #wt < :wt)",
    # A step is counted as evaluated once.
    "step_not_evaluated": "attribute_exists(pk) AND attribute_not_exists(evaluated)",
    # A published outbox item is marked once (a concurrent publisher loses quietly).
    "outbox_unpublished": "attribute_exists(pk) AND attribute_not_exists(published)",
    # A profiler file is folded into its job's profiler-rule states once (a re-delivery finds its marker).
    "profiler_file_is_new": "attribute_not_exists(pk)",
    # A profiler rule's state is replaced only by a state computed from it (concurrent files re-read).
    "profiler_state_unchanged": "attribute_not_exists(pk) OR version = :version",
    # A job error is set once: a later, lesser one (a corrupt profiler file) does not replace the first.
    "job_error_unset": "attribute_exists(pk) AND attribute_not_exists(job_error)",
    # expected_steps only grows (end markers of several workers race).
    "expected_steps_lower": "attribute_not_exists(expected_steps) OR expected_steps < :n",
    # An outbox item is claimed by one publisher at a time; a claim older than the publisher's timeout is
    # abandoned (its publisher died) and may be taken over.
    "outbox_claimable": "attribute_exists(pk) AND attribute_not_exists(published) "
    "AND (attribute_not_exists(claimed) OR claimed < :stale)",
    # Only the claim's holder releases or completes it.
    "outbox_claim_held": "claim_id = :claim AND attribute_not_exists(published)",
    # An email/sms action sends again only after its reminder interval (a retry of the same item may resend).
    "alert_gate_open": "attribute_not_exists(sent_at) OR sent_at <= :cutoff OR sent_by = :me",
    # IssuesFound details move to the earliest firing step (order-independent final state).
    "issue_step_is_later": "#status = :issues AND (attribute_not_exists(issue_step) OR issue_step > :step)",
}


class Conflict(Exception):
    """A conditional write or transaction lost: the caller re-reads (or the record already exists)."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__(", ".join(reasons))


def _ser() -> Any:
    from boto3.dynamodb.types import TypeSerializer

    return TypeSerializer()


def _deser() -> Any:
    from boto3.dynamodb.types import TypeDeserializer

    return TypeDeserializer()


class StateTable:
    """Typed access to the state table; every method is one bounded request (or transaction).

    Examples
    --------
    >>> table = StateTable("tornasole-state")  # doctest: +SKIP
    >>> table.load_job("my-job").status        # doctest: +SKIP
    """

    def __init__(
        self, table_name: str | None = None, client: Any = None, spec: TableSpec | None = None
    ) -> None:
        self.spec = spec or DEFAULT_SPEC.table
        self.name = table_name or self.spec.name
        self._client = client

    # -- plumbing ------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            from tornasole.aws.clients import dynamodb_client

            return dynamodb_client()
        return self._client

    @staticmethod
    def to_attrs(item: dict[str, Any]) -> dict[str, Any]:
        ser = _ser()
        return {k: ser.serialize(to_dynamo(v)) for k, v in item.items() if v is not None}

    @staticmethod
    def from_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
        de = _deser()
        return {k: from_dynamo(de.deserialize(v)) for k, v in attrs.items()}

    def key(self, pk: str, sk: str) -> dict[str, Any]:
        return {self.spec.partition_key: {"S": pk}, self.spec.sort_key: {"S": sk}}

    def get(self, pk: str, sk: str) -> dict[str, Any] | None:
        resp = self.client.get_item(TableName=self.name, Key=self.key(pk, sk), ConsistentRead=True)
        return self.from_attrs(resp["Item"]) if "Item" in resp else None

    def query(
        self, pk: str, begins: str, *, index: bool = False, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Items of one partition whose sort key starts with ``begins`` (paginated)."""
        pk_name = self.spec.gsi.partition_key if index else self.spec.partition_key
        sk_name = self.spec.gsi.sort_key if index else self.spec.sort_key
        kwargs: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": "#p = :p AND begins_with(#s, :b)",
            "ExpressionAttributeNames": {"#p": pk_name, "#s": sk_name},
            "ExpressionAttributeValues": {":p": {"S": pk}, ":b": {"S": begins}},
        }
        if not begins:  # the whole partition (an empty prefix is not a valid key condition)
            kwargs["KeyConditionExpression"] = "#p = :p"
            kwargs["ExpressionAttributeNames"] = {"#p": pk_name}
            kwargs["ExpressionAttributeValues"] = {":p": {"S": pk}}
        if index:
            kwargs["IndexName"] = self.spec.gsi.name
        else:
            kwargs["ConsistentRead"] = True
        items: list[dict[str, Any]] = []
        while True:
            resp = self.client.query(**kwargs)
            items.extend(self.from_attrs(i) for i in resp.get("Items", []))
            if limit is not None and len(items) >= limit:
                return items[:limit]
            if "LastEvaluatedKey" not in resp:
                return items
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def put(
        self, item: dict[str, Any], condition: str | None = None, values: dict[str, Any] | None = None
    ) -> bool:
        """PutItem under a named condition; False when the condition failed (already recorded)."""
        try:
            self.client.put_item(**self.put_args(item, condition, values))
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def update(
        self,
        pk: str,
        sk: str,
        expression: str,
        values: dict[str, Any] | None = None,
        *,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        return_new: bool = False,
    ) -> dict[str, Any] | None:
        """UpdateItem; the new item with ``return_new``; ``Conflict`` when the condition fails."""
        kwargs = self.update_args(pk, sk, expression, values, condition=condition, names=names)
        if return_new:
            kwargs["ReturnValues"] = "ALL_NEW"
        try:
            resp = self.client.update_item(**kwargs)
        except self.client.exceptions.ConditionalCheckFailedException as exc:
            raise Conflict([f"{condition}: ConditionalCheckFailed"]) from exc
        return self.from_attrs(resp["Attributes"]) if return_new else None

    def update_args(
        self,
        pk: str,
        sk: str,
        expression: str,
        values: dict[str, Any] | None = None,
        *,
        condition: str | None = None,
        names: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "TableName": self.name,
            "Key": self.key(pk, sk),
            "UpdateExpression": expression,
        }
        if condition:
            kwargs["ConditionExpression"] = CONDITIONS[condition]
        if values:
            kwargs["ExpressionAttributeValues"] = self.to_attrs(values)
            check_item(kwargs["ExpressionAttributeValues"], f"update of {pk} / {sk}")
        if names:
            kwargs["ExpressionAttributeNames"] = names
        return kwargs

    def put_args(
        self, item: dict[str, Any], condition: str | None = None, values: dict | None = None
    ) -> dict:
        kwargs: dict[str, Any] = {"TableName": self.name, "Item": self.to_attrs(item)}
        check_item(kwargs["Item"], f"item {item.get('pk')} / {item.get('sk')}")
        if condition:
            kwargs["ConditionExpression"] = CONDITIONS[condition]
        if values:
            kwargs["ExpressionAttributeValues"] = self.to_attrs(values)
        return kwargs

    def transact(self, items: list[dict[str, Any]]) -> None:
        """TransactWriteItems; ``Conflict`` (with the cancellation reasons) when any condition failed.

        ``items`` are ``{"Put": {...}}`` / ``{"Update": {...}}`` built with ``put_args`` / ``update_args``.
        """
        size = sum(
            item_bytes(op.get("Item") or op.get("ExpressionAttributeValues") or {})
            for entry in items
            for op in entry.values()
        )
        if size > DYNAMODB_TRANSACTION_BYTES:
            raise ItemTooLarge(f"transaction of {size} bytes exceeds DynamoDB's {DYNAMODB_TRANSACTION_BYTES}")
        try:
            self.client.transact_write_items(TransactItems=items)
        except self.client.exceptions.TransactionCanceledException as exc:
            reasons = [r.get("Code", "None") for r in exc.response.get("CancellationReasons", [])]
            raise Conflict(reasons) from exc

    # -- jobs -----------------------------------------------------------------------------
    def load_job(self, job: str) -> JobState | None:
        """The job and its rules, from one consistent Query of the job's ``#`` items."""
        return job_state(job, self.query(job_pk(job), JOB_ITEMS_PREFIX), self.spec.sort_key)

    def job_for_trial(self, trial_path: str) -> str | None:
        item = self.get(trial_pk(trial_path), META)
        return item["job"] if item else None

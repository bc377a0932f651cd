"""Per-step state: workers seen, pending steps, (rule, step) evaluation records, orphans.

Why these shapes (table design: ``tornasole.evaluator.store.state_table``):

* A step's workers are a DynamoDB string set grown with ``ADD``: the update is
  idempotent (a duplicate notification adds nothing) and race-free (no
  read-modify-write), and ``ReturnValues=ALL_NEW`` tells the caller at once
  whether the last worker's index has arrived.
* Evaluating a step writes one evaluation record per rule with
  ``attribute_not_exists`` in the same transaction as the outbox items it
  causes (issue event, alerts), so a retried step never duplicates them;
  counting the step as evaluated is a second guarded transaction.
* Steps waiting for evaluation carry the sparse ``PENDING`` GSI key, so the
  schedule re-drives exactly those after a crash, without scanning.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from tornasole.evaluator.details import clip
from tornasole.evaluator.models import StepOutcome
from tornasole.evaluator.store.item_limits import (
    DYNAMODB_TRANSACTION_BYTES,
    ItemTooLarge,
    cap_values,
    item_bytes,
)
from tornasole.evaluator.store.keys import (
    META,
    ORPHAN_PREFIX,
    PENDING,
    TRIAL_ERROR,
    eval_prefix,
    eval_sk,
    item,
    job_pk,
    orphan_sk,
    parse_pending_gsi_sk,
    pending_gsi_sk,
    rule_sk,
    step_sk,
    trial_pk,
)
from tornasole.evaluator.store.outbox import OutboxItem, outbox_put
from tornasole.evaluator.store.state_table import Conflict, StateTable

__all__ = ["StepRecord", "StepStore", "ORPHAN_TTL_S", "EVAL_TTL_S", "MAX_STEP_ATTEMPTS"]

log = logging.getLogger(__name__)

ORPHAN_TTL_S = 7 * 24 * 3600
EVAL_TTL_S = 180 * 24 * 3600
MAX_TRANSACTION_ITEMS = 100  # DynamoDB's TransactWriteItems limit
#: Failed evaluations of one step (an attempt that raised, or one the scheduled check found dead and re-drove)
#: before the step is recorded as an error for every rule and the rules move on to later steps. Attempts in
#: flight are never counted: duplicated notifications evaluating the same step at once are not failures.
MAX_STEP_ATTEMPTS = 3


@dataclass(frozen=True)
class StepRecord:
    """One step as stored: the workers whose index files arrived, and whether it was evaluated."""

    step: int
    workers: frozenset[str]
    evaluated: bool = False
    mode: str | None = None
    mode_step: int | None = None
    attempts: int = 0
    last_error: str | None = None
    #: worker -> S3's write time (ms) of its index file as evaluated: a later write is a rewrite
    written: dict[str, int] = field(default_factory=dict)


#: Attribute of a step item holding S3's write time of one worker's index file (``written_attr(worker)``).
WRITTEN_PREFIX = "written#"


def written_attr(worker: str) -> str:
    return f"{WRITTEN_PREFIX}{worker}"


def _step_record(item: dict[str, Any]) -> StepRecord:
    return StepRecord(
        written={k[len(WRITTEN_PREFIX) :]: int(v) for k, v in item.items() if k.startswith(WRITTEN_PREFIX)},
        step=int(item["step"]),
        workers=frozenset(item.get("workers", ())),
        evaluated="evaluated" in item,
        attempts=int(item.get("attempts", 0)),
        last_error=item.get("last_error"),
        mode=item.get("mode"),
        mode_step=int(item["mode_step"]) if item.get("mode_step") is not None else None,
    )


class StepStore:
    """Step-level writes and reads of one job (each one bounded request or transaction)."""

    def __init__(self, table: StateTable) -> None:
        self.table = table

    # -- workers seen ----------------------------------------------------------------------
    def record_worker(
        self, job: str, step: int, worker: str, now_s: float, written_ms: int | None = None
    ) -> StepRecord:
        """Add ``worker`` to the step's worker set (idempotent) and note the job's activity; with
        ``written_ms`` (S3's write time of its index file) keep the first one seen for the worker."""
        expression = (
            "ADD workers :w SET step = :step, first_seen = if_not_exists(first_seen, :now), last_seen = :now"
        )
        values: dict[str, Any] = {":w": {worker}, ":step": step, ":now": int(now_s)}
        names = None
        if written_ms is not None:
            expression += ", #wt = if_not_exists(#wt, :wt)"
            values[":wt"] = written_ms
            names = {"#wt": written_attr(worker)}
        item = self.table.update(job_pk(job), step_sk(step), expression, values, names=names, return_new=True)
        try:
            self.table.update(
                job_pk(job), META, "SET last_activity = :now", {":now": now_s}, condition="job_exists"
            )
        except Conflict:
            log.warning("job disappeared while recording a step", extra={"job": job, "step": step})
        return _step_record(item or {})

    def step(self, job: str, step: int) -> StepRecord | None:
        item = self.table.get(job_pk(job), step_sk(step))
        return _step_record(item) if item else None

    def previous_steps(self, job: str, before: int, limit: int) -> list[StepRecord]:
        """Up to ``limit`` steps recorded before ``before``, newest first: one bounded Query."""
        return self._steps_before(job, before, limit, newest_first=True)

    def first_steps(self, job: str, before: int, limit: int) -> list[StepRecord]:
        """Up to ``limit`` of the job's first recorded steps before ``before``, oldest first."""
        return self._steps_before(job, before, limit, newest_first=False)

    def _steps_before(self, job: str, before: int, limit: int, *, newest_first: bool) -> list[StepRecord]:
        if limit <= 0 or before <= 0:
            return []
        resp = self.table.client.query(
            TableName=self.table.name,
            KeyConditionExpression="pk = :p AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":p": {"S": job_pk(job)},
                ":lo": {"S": step_sk(0)},
                ":hi": {"S": step_sk(before - 1)},
            },
            ScanIndexForward=not newest_first,
            Limit=limit,
            ConsistentRead=True,
        )
        return [_step_record(self.table.from_attrs(i)) for i in resp.get("Items", [])]

    # -- pending ---------------------------------------------------------------------------
    def mark_pending(self, job: str, step: int, now_ms: int) -> None:
        """Put the step on the sparse PENDING index until it is evaluated (no-op once evaluated)."""
        try:
            self.table.update(
                job_pk(job),
                step_sk(step),
                "SET gsi1pk = :p, gsi1sk = :s, pending_since = if_not_exists(pending_since, :now)",
                {":p": PENDING, ":s": pending_gsi_sk(job, step), ":now": now_ms},
                condition="step_not_evaluated",
            )
        except Conflict:
            pass

    def begin_attempt(self, job: str, step: int, now_ms: int, redrive: bool = False) -> int | None:
        """Keep the step pending while it is evaluated; the failed attempts so far (a re-drive by the
        scheduled check counts one: the attempt it replaces died), or None if already evaluated."""
        try:
            item = self.table.update(
                job_pk(job),
                step_sk(step),
                "SET gsi1pk = :p, gsi1sk = :s, pending_since = if_not_exists(pending_since, :now) "
                "ADD attempts :n",
                {":p": PENDING, ":s": pending_gsi_sk(job, step), ":now": now_ms, ":n": int(redrive)},
                condition="step_not_evaluated",
                return_new=True,
            )
        except Conflict:
            return None
        return int((item or {}).get("attempts", 0))

    def note_rewritten(self, job: str, step: int, worker: str, written_ms: int) -> bool:
        """The step's rewrite by ``worker`` written at ``written_ms`` was evaluated: later notifications of
        that write (or of earlier ones) are duplicates. False when a later write was noted meanwhile."""
        try:
            self.table.update(
                job_pk(job),
                step_sk(step),
                "SET #wt = :wt",
                {":wt": written_ms},
                condition="write_is_later",
                names={"#wt": written_attr(worker)},
            )
        except Conflict:
            return False
        return True

    def note_failure(self, job: str, step: int, reason: str, now_ms: int) -> None:
        """Why the last attempt failed (shown when the step is finally recorded as an error)."""
        try:
            self.table.update(
                job_pk(job),
                step_sk(step),
                "SET last_error = :e, pending_since = :now ADD attempts :one",
                {":e": clip(reason), ":now": now_ms, ":one": 1},
                condition="step_not_evaluated",
            )
        except Conflict:
            pass

    def pending(self, job: str | None = None) -> list[tuple[str, int, int]]:
        """``(job, step, pending_since_ms)`` of steps awaiting evaluation (one job, or all)."""
        items = self.table.query(PENDING, f"{job}#" if job else "", index=True)
        out = []
        for i in items:
            name, step = parse_pending_gsi_sk(i[self.table.spec.gsi.sort_key])
            out.append((name, step, int(i.get("pending_since", 0))))
        return out

    # -- evaluation records ------------------------------------------------------------------
    def _record_put(self, job: str, outcome: StepOutcome, now_ms: int) -> dict[str, Any]:
        record = self._record(job, outcome, now_ms)
        try:
            return {"Put": self.table.put_args(record, "evaluation_is_new")}
        except ItemTooLarge as exc:  # values are capped, so only pathological names/modes get here
            log.warning("evaluation record too large; values dropped: %s", exc)
            record.update(values="{}", details=clip(outcome.details, 256), mode=None, error=clip(str(exc)))
            return {"Put": self.table.put_args(record, "evaluation_is_new")}

    def record_evaluation(self, job: str, outcome: StepOutcome, extra: list[OutboxItem], now_ms: int) -> bool:
        """Write the (rule, step) record and its outbox items at once; False if already recorded."""
        items = [self._record_put(job, outcome, now_ms)]
        items.extend(outbox_put(self.table, job, x, now_ms) for x in extra)
        try:
            self.table.transact(items)
        except Conflict as exc:
            if exc.reasons and exc.reasons[0] == "ConditionalCheckFailed":
                return False
            raise
        return True

    @staticmethod
    def _record(job: str, outcome: StepOutcome, now_ms: int) -> dict[str, Any]:
        record = item(job_pk(job), eval_sk(outcome.rule_name, outcome.step, outcome.rewrite))
        record.update(
            rewrite=outcome.rewrite,
            rule=outcome.rule_name,
            step=outcome.step,
            fired=outcome.fired,
            skipped=outcome.skipped or None,
            mode=clip(outcome.mode, 64) if outcome.mode else None,
            mode_step=outcome.mode_step,
            details=clip(outcome.details),
            values=cap_values(outcome.values),
            error=clip(outcome.error) if outcome.error else None,
            step_error=clip(outcome.step_error) if outcome.step_error else None,
            latency_ms=int(outcome.latency_ms),
            evaluated_at=now_ms,
            expires_at=now_ms // 1000 + EVAL_TTL_S,
        )
        return record

    def record_evaluations(
        self, job: str, batch: list[tuple[StepOutcome, list[OutboxItem]]], now_ms: int
    ) -> None:
        """All rules' records of one step in one transaction when they fit (the usual case); if some were
        already recorded (a retried step) or they do not fit (100 items, 4 MB), rule by rule."""
        items = []
        for outcome, extra in batch:
            items.append(self._record_put(job, outcome, now_ms))
            items.extend(outbox_put(self.table, job, x, now_ms) for x in extra)
        size = sum(item_bytes(i["Put"]["Item"]) for i in items)
        if 0 < len(items) <= MAX_TRANSACTION_ITEMS and size <= DYNAMODB_TRANSACTION_BYTES:
            try:
                self.table.transact(items)
                return
            except Conflict as exc:
                if "ConditionalCheckFailed" not in exc.reasons:
                    raise
        for outcome, extra in batch:
            self.record_evaluation(job, outcome, extra, now_ms)

    def evaluations(self, job: str, rule: str) -> list[dict[str, Any]]:
        """A rule's evaluation records (its report), oldest step first."""
        items = self.table.query(job_pk(job), eval_prefix(rule))
        for i in items:
            i["values"] = json.loads(i.get("values") or "{}")
        return items

    def fired_steps(self, job: str, rule: str) -> list[int]:
        """Steps where ``rule`` fired, ascending: a Query of its evaluation records filtered on ``fired``
        and projected to the step (the job's report lists them; the records themselves stay unread)."""
        kwargs: dict[str, Any] = {
            "TableName": self.table.name,
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :b)",
            "FilterExpression": "#f = :t",
            "ProjectionExpression": "#s",
            "ExpressionAttributeNames": {"#f": "fired", "#s": "step"},
            "ExpressionAttributeValues": {
                ":p": {"S": job_pk(job)},
                ":b": {"S": eval_prefix(rule)},
                ":t": {"BOOL": True},
            },
            "ConsistentRead": True,
        }
        steps: list[int] = []
        while True:
            resp = self.table.client.query(**kwargs)
            steps.extend(int(i["step"]["N"]) for i in resp.get("Items", []) if "step" in i)
            if "LastEvaluatedKey" not in resp:
                return sorted(steps)
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def count_evaluated(self, job: str, rule: str) -> int:
        """Steps at which ``rule`` really evaluated its tensors (no error, not skipped): a paginated COUNT
        Query, run once per rule when the job completes."""
        return self._count_evaluations(
            job,
            rule,
            "attribute_not_exists(#e) AND attribute_not_exists(step_error) AND attribute_not_exists(skipped)",
            {"#e": "error"},
        )

    def count_unreadable(self, job: str, rule: str) -> int:
        """Steps that could not be evaluated for ``rule`` (unreadable, incomplete: a ``step_error``). Why:
        a rule that evaluated nothing because its data was broken has failed (``Error``); one that
        evaluated nothing because nothing it reads was saved has not (``NothingEvaluated``)."""
        return self._count_evaluations(
            job, rule, "attribute_exists(step_error) AND attribute_not_exists(#e)", {"#e": "error"}
        )

    def count_step_errors(self, job: str, rule: str) -> int:
        """Steps recorded as an error of the step for ``rule`` (unreadable, incomplete, given up), counted
        once per rule when the job completes, so its final status can say how many (#34 N13)."""
        return self._count_evaluations(job, rule, "attribute_exists(step_error)", None)

    def _count_evaluations(self, job: str, rule: str, condition: str, names: dict[str, str] | None) -> int:
        kwargs: dict[str, Any] = {
            "TableName": self.table.name,
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :b)",
            # a rewritten step's evaluation is the same step judged again, not one more step
            "FilterExpression": f"({condition}) AND attribute_not_exists(rewrite)",
            "ExpressionAttributeValues": {":p": {"S": job_pk(job)}, ":b": {"S": eval_prefix(rule)}},
            "Select": "COUNT",
            "ConsistentRead": True,
        }
        if names:
            kwargs["ExpressionAttributeNames"] = names
        n = 0
        while True:
            resp = self.table.client.query(**kwargs)
            n += int(resp.get("Count", 0))
            if "LastEvaluatedKey" not in resp:
                return n
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def mark_evaluated(self, job: str, step: int, now_ms: int) -> bool:
        """Count the step as evaluated exactly once and take it off the PENDING index."""
        try:
            self.table.transact(self._mark_items(job, step, now_ms, "job_exists"))
        except Conflict:
            return False
        return True

    def mark_evaluated_before_end(self, job: str, step: int, now_ms: int) -> bool | None:
        """``mark_evaluated`` while the job's end marker is not seen: True (counted now) or False (counted
        before); None when the end marker was seen meanwhile (or the job is gone), and nothing was written.

        Why: completion needs the end marker, and the end marker's handler, which sets it *before* it
        reads the job to complete it, then sees this step counted. A step counted under this condition
        therefore never has to re-read the job to try completing it (one Query per step saved); on None
        the caller counts the step with ``mark_evaluated`` and tries completion as before.
        """
        try:
            self.table.transact(self._mark_items(job, step, now_ms, "job_exists_before_end"))
        except Conflict as exc:
            if len(exc.reasons) > 1 and exc.reasons[1] == "ConditionalCheckFailed":
                return None
            return False
        return True

    def record_and_mark_before_end(
        self, job: str, outcomes: list[StepOutcome], step: int, now_ms: int
    ) -> bool:
        """A step whose outcomes write nothing else (no issue, no transition), in one transaction: its
        evaluation records and its count (``mark_evaluated_before_end``). False when nothing was written
        (a record or the count existed, the end marker was seen, or it would not fit in one transaction):
        the caller then takes the usual path (``record_evaluations``, ``mark_evaluated``...), whose
        idempotent writes decide as before. One TransactWriteItems per healthy step instead of two."""
        items = [self._record_put(job, o, now_ms) for o in outcomes]
        items += self._mark_items(job, step, now_ms, "job_exists_before_end")
        if len(items) > MAX_TRANSACTION_ITEMS:
            return False
        try:
            self.table.transact(items)
        except (Conflict, ItemTooLarge):  # ItemTooLarge: over the transaction's bytes, nothing sent
            return False
        return True

    def _mark_items(self, job: str, step: int, now_ms: int, job_condition: str) -> list[dict[str, Any]]:
        return [
            {
                "Update": self.table.update_args(
                    job_pk(job),
                    step_sk(step),
                    "SET evaluated = :now REMOVE gsi1pk, gsi1sk",
                    {":now": now_ms},
                    condition="step_not_evaluated",
                )
            },
            {
                "Update": self.table.update_args(
                    job_pk(job), META, "ADD steps_evaluated :one", {":one": 1}, condition=job_condition
                )
            },
        ]

    # -- job facts learnt from files ------------------------------------------------------------
    def set_num_workers(self, job: str, n: int) -> None:
        self.table.update(job_pk(job), META, "SET num_workers = if_not_exists(num_workers, :n)", {":n": n})

    def set_end_marker(self, job: str, listed_steps: int, now_s: float) -> None:
        """An end marker landed: note when, and raise ``expected_steps`` to the steps listed now."""
        self.table.update(
            job_pk(job),
            META,
            "SET end_marker_seen = :t, end_marker_at = :now, last_activity = :now",
            {":t": True, ":now": now_s},
        )
        self.raise_expected_steps(job, listed_steps)

    def raise_expected_steps(self, job: str, n: int) -> None:
        """``expected_steps = max(expected_steps, n)``: racing end markers never lower it."""
        try:
            self.table.update(
                job_pk(job), META, "SET expected_steps = :n", {":n": n}, condition="expected_steps_lower"
            )
        except Conflict:
            pass

    def set_job_error(self, job: str, reason: str) -> None:
        self.table.update(job_pk(job), META, "SET job_error = :r", {":r": reason[:1024]})

    def refine_issue(self, job: str, rule: str, step: int, details: str) -> None:
        """Keep an IssuesFound rule's details on its earliest firing step (whatever the arrival order)."""
        try:
            self.table.update(
                job_pk(job),
                rule_sk(rule),
                "SET issue_step = :step, details = :d",
                {":step": step, ":d": details, ":issues": "IssuesFound"},
                condition="issue_step_is_later",
                names={"#status": "status"},
            )
        except Conflict:
            pass

    # -- before registration -------------------------------------------------------------------
    def record_orphan(self, trial_path: str, step: int, worker: str, now_s: float) -> None:
        """An index file for a trial no job owns yet: kept (with a TTL) until the job registers."""
        self.table.put(
            item(
                trial_pk(trial_path),
                orphan_sk(step, worker),
                step=step,
                worker=worker,
                expires_at=int(now_s) + ORPHAN_TTL_S,
            )
        )

    def take_orphans(self, trial_path: str) -> list[tuple[int, str]]:
        items = self.table.query(trial_pk(trial_path), ORPHAN_PREFIX)
        for i in items:
            self.table.client.delete_item(
                TableName=self.table.name,
                Key=self.table.key(i[self.table.spec.partition_key], i[self.table.spec.sort_key]),
            )
        return [(int(i["step"]), i["worker"]) for i in items]

    def set_trial_error(self, trial_path: str, key: str, reason: str, now_ms: int) -> None:
        self.table.put(item(trial_pk(trial_path), TRIAL_ERROR, key=key, reason=clip(reason), time=now_ms))

    def trial_error(self, trial_path: str) -> dict[str, Any] | None:
        return self.table.get(trial_pk(trial_path), TRIAL_ERROR)

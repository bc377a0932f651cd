"""Status transitions, each one transaction with its outbox item.

Why one transaction per transition: the subscriber must hear about every
status change exactly once, even if the Lambda dies right after the write.
Writing the change and the event (as an ``OUTBOX#`` item) atomically means an
event exists if and only if the change happened; the stream publisher then
delivers it at least once, with a deterministic ``TornasoleEventId`` the
consumer dedupes on (see ``tornasole.evaluator.store.state_table`` for the table).

``apply(job, decide)`` is a read-decide-commit loop: ``decide`` is a pure
function of the current ``JobState`` returning the next ``Change`` (or None).
A lost race (``Conflict``) just re-reads, so concurrent invocations converge,
and because statuses only move forward a replayed notification finds nothing
left to change.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tornasole.evaluator.details import describe
from tornasole.evaluator.models import JobState, JobStatus, RuleStatus
from tornasole.evaluator.store.keys import META, job_pk, rule_sk
from tornasole.evaluator.store.outbox import OutboxItem, outbox_put
from tornasole.evaluator.store.state_table import Conflict, StateTable
from tornasole.stack_spec import DETAIL_TYPE_JOB_STATE_CHANGE

__all__ = [
    "JOB",
    "Change",
    "OutboxItem",
    "Transitions",
    "state_event",
    "event_id",
    "outbox_put",
    "to_error",
]

log = logging.getLogger(__name__)

JOB = "@job"  # the entity name of a job-level change (a rule cannot be named like this: '@' is reserved)
MAX_CONFLICTS = 50


@dataclass(frozen=True)
class Change:
    """One status change: of the job (``entity == JOB``) or of one rule."""

    entity: str
    status: str
    details: str = ""
    issue_step: int | None = None
    failure_reason: str | None = None
    extra: tuple[OutboxItem, ...] = ()
    report_location: str | None = None  # a job's terminal change: where its report was written


def event_id(job: str, rules_rev: int, entity: str, status: str) -> str:
    """Deterministic id of a transition: the same change always gets the same id."""
    what = "job" if entity == JOB else f"rule/{entity}"
    return f"{job}:{rules_rev}:{what}:{status}"


def state_event(state: JobState, eid: str) -> OutboxItem:
    return OutboxItem(
        eid,
        "event",
        {
            "detail_type": DETAIL_TYPE_JOB_STATE_CHANGE,
            "resources": [state.arn],
            "detail": describe(state, eid),
        },
    )


class Transitions:
    """The transition loop over one ``StateTable`` (registration: ``registration.registrar``)."""

    def __init__(self, table: StateTable) -> None:
        self.table = table

    # -- transitions -----------------------------------------------------------------------
    def apply(
        self,
        job: str,
        decide: Callable[[JobState], Change | None],
        now_ms: int,
        state: JobState | None = None,
    ) -> list[Change]:
        """Commit what ``decide`` asks for, one transaction (and one event) each, until it asks nothing.

        ``state`` (optional) is a recent read to decide from first, saving a Query. Only for decisions that
        depend on statuses alone: statuses move forward, so an older read can only ask for a change that
        then conflicts (and is re-read), never miss one. Counter-based decisions (completion) must re-read.
        """
        applied: list[Change] = []
        conflicts = 0
        while True:
            if state is None:
                state = self.table.load_job(job)
            if state is None:
                return applied
            change = decide(state)
            if change is None:
                return applied
            try:
                self._commit(state, change, now_ms)
            except Conflict as exc:
                state = None
                conflicts += 1
                log.info("transition lost a race; re-reading", extra={"job": job, "reasons": exc.reasons})
                if conflicts >= MAX_CONFLICTS:
                    raise
                continue
            state = None
            applied.append(change)

    def meta_update(
        self, state: JobState, now_ms: int, sets: dict[str, Any], remove_gsi: bool = False
    ) -> dict:
        names: dict[str, str] = {}
        values: dict[str, Any] = {":seq": state.seq, ":next": state.seq + 1, ":now": now_ms}
        parts = ["seq = :next", "last_modified = :now"]
        for i, (k, v) in enumerate(sets.items()):
            names[f"#a{i}"] = k
            values[f":a{i}"] = v
            parts.append(f"#a{i} = :a{i}")
        if remove_gsi:  # a terminal job leaves the ACTIVE index
            names["#gp"], names["#gs"] = self.table.spec.gsi.partition_key, self.table.spec.gsi.sort_key
        expr = "SET " + ", ".join(parts) + (" REMOVE #gp, #gs" if remove_gsi else "")
        return {
            "Update": self.table.update_args(
                job_pk(state.name),
                META,
                expr,
                values,
                condition="job_unchanged_since_read",
                names=names or None,
            )
        }

    def _commit(self, state: JobState, change: Change, now_ms: int) -> None:
        eid = event_id(state.name, state.rules_rev, change.entity, change.status)
        if change.entity == JOB:
            status = JobStatus(change.status)
            terminal = status in (JobStatus.COMPLETED, JobStatus.STOPPED, JobStatus.FAILED)
            sets: dict[str, Any] = {"status": status.value}
            if terminal:
                sets["end_time"] = now_ms
            if change.failure_reason:
                sets["failure_reason"] = change.failure_reason
            if change.report_location:
                sets["report_location"] = change.report_location
            new_state = dataclasses.replace(
                state,
                status=status,
                seq=state.seq + 1,
                last_modified_ms=now_ms,
                end_ms=now_ms if terminal else state.end_ms,
                failure_reason=change.failure_reason or state.failure_reason,
                report_location=change.report_location or state.report_location,
            )
            items = [self.meta_update(state, now_ms, sets, remove_gsi=terminal)]
        else:
            rule = state.rule(change.entity)
            if rule is None:
                raise ValueError(f"job {state.name!r} has no rule {change.entity!r}")
            new_rule = dataclasses.replace(
                rule,
                status=RuleStatus(change.status),
                details=change.details,
                last_modified_ms=now_ms,
                issue_step=change.issue_step,
            )
            new_state = dataclasses.replace(
                state,
                seq=state.seq + 1,
                last_modified_ms=now_ms,
                rules=tuple(new_rule if r is rule else r for r in state.rules),
            )
            rule_sets = "SET #status = :to, details = :d, last_modified = :now" + (
                ", issue_step = :step" if change.issue_step is not None else ""
            )
            values: dict[str, Any] = {
                ":to": change.status,
                ":d": change.details,
                ":now": now_ms,
                ":from": rule.status.value,
            }
            if change.issue_step is not None:
                values[":step"] = change.issue_step
            items = [
                self.meta_update(state, now_ms, {}),
                {
                    "Update": self.table.update_args(
                        job_pk(state.name),
                        rule_sk(change.entity),
                        rule_sets,
                        values,
                        condition="rule_in_expected_status",
                        names={"#status": "status"},
                    )
                },
            ]
        items.append(outbox_put(self.table, state.name, state_event(new_state, eid), now_ms))
        items.extend(outbox_put(self.table, state.name, extra, now_ms) for extra in change.extra)
        self.table.transact(items)


def to_error(state: JobState, rule_name: str, reason: str) -> Change | None:
    """A still-evaluating rule -> Error with ``reason`` (registration-time validation failures)."""
    rule = state.rule(rule_name)
    if rule is None or rule.status not in (RuleStatus.IN_PROGRESS, RuleStatus.ISSUES_FOUND):
        return None
    return Change(rule_name, RuleStatus.ERROR.value, details=reason)

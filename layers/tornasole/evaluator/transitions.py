"""Status transitions and registration, each one transaction with its outbox item.

Why one transaction per transition: the subscriber must hear about every
status change exactly once, even if the Lambda dies right after the write.
Writing the change and the event (as an ``OUTBOX#`` item) atomically means an
event exists if and only if the change happened; the stream publisher then
delivers it at least once, with a deterministic ``TornasoleEventId`` the
consumer dedupes on (see ``tornasole.evaluator.state`` for the table).

``apply(job, decide)`` is a read-decide-commit loop: ``decide`` is a pure
function of the current ``JobState`` returning the next ``Change`` (or None).
A lost race (``Conflict``) just re-reads, so concurrent invocations converge,
and because statuses only move forward a replayed notification finds nothing
left to change.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tornasole.evaluator.details import describe
from tornasole.evaluator.models import JobSpec, JobState, JobStatus, RuleConfig, RuleState, RuleStatus
from tornasole.evaluator.state import Conflict, StateTable, job_pk, trial_pk
from tornasole.exceptions import TornasoleValueError
from tornasole.stack_spec import DETAIL_TYPE_JOB_STATE_CHANGE

__all__ = [
    "JOB",
    "Change",
    "OutboxItem",
    "Transitions",
    "JobConflictError",
    "event_id",
    "outbox_put",
    "to_error",
]

log = logging.getLogger(__name__)

JOB = "@job"  # the entity name of a job-level change (a rule cannot be named like this: '@' is reserved)
MAX_CONFLICTS = 50


class JobConflictError(TornasoleValueError):
    """Registering would change an existing job (use ``update_job_rules``) or steal another job's trial."""


@dataclass(frozen=True)
class OutboxItem:
    """A side effect delivered after the commit: ``event`` (EventBridge), ``alert`` (SNS), ``stop`` (S3)."""

    event_id: str
    kind: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class Change:
    """One status change: of the job (``entity == JOB``) or of one rule."""

    entity: str
    status: str
    details: str = ""
    issue_step: int | None = None
    failure_reason: str | None = None
    extra: tuple[OutboxItem, ...] = ()


def event_id(job: str, rules_rev: int, entity: str, status: str) -> str:
    """Deterministic id of a transition: the same change always gets the same id."""
    what = "job" if entity == JOB else f"rule/{entity}"
    return f"{job}:{rules_rev}:{what}:{status}"


def outbox_put(table: StateTable, job: str, item: OutboxItem, now_ms: int) -> dict[str, Any]:
    """The transaction entry inserting one outbox item (``outbox_is_new``)."""
    return {
        "Put": table.put_args(
            {
                "pk": job_pk(job),
                "sk": f"OUTBOX#{item.event_id}",
                "kind": item.kind,
                "payload": json.dumps(item.payload, sort_keys=True),
                "created": now_ms,
                "gsi1pk": "OUTBOX",
                "gsi1sk": f"{now_ms:013d}#{item.event_id}",
            },
            "outbox_is_new",
        )
    }


def _state_event(state: JobState, eid: str) -> OutboxItem:
    return OutboxItem(
        eid,
        "event",
        {
            "detail_type": DETAIL_TYPE_JOB_STATE_CHANGE,
            "resources": [state.arn],
            "detail": describe(state, eid),
        },
    )


def _rule_item(job: str, order: int, rule: RuleConfig, now_ms: int) -> dict[str, Any]:
    return {
        "pk": job_pk(job),
        "sk": f"#RULE#{rule.name}",
        "config": rule.to_json(),
        "status": RuleStatus.IN_PROGRESS.value,
        "details": "",
        "order": order,
        "last_modified": now_ms,
    }


class Transitions:
    """Registration, rule updates and the transition loop over one ``StateTable``."""

    def __init__(self, table: StateTable) -> None:
        self.table = table

    # -- registration ----------------------------------------------------------------------
    def register(
        self, spec: JobSpec, arn: str, now_ms: int, initial_errors: dict[str, str] | None = None
    ) -> str:
        """Create the job, its rules, the trial mapping and the InProgress event in one transaction.

        Returns ``"registered"`` or ``"unchanged"`` (same job registered again); raises
        ``JobConflictError`` when the rules differ (use ``update_job_rules``) or the trial is taken.
        """
        rules = tuple(RuleState(r, RuleStatus.IN_PROGRESS, "", now_ms) for r in spec.rules)
        state = JobState(
            name=spec.name,
            arn=arn,
            trial_path=spec.trial_path,
            status=JobStatus.IN_PROGRESS,
            seq=1,
            rules_rev=1,
            rules=rules,
            hook_config=spec.hook_config,
            num_workers=spec.num_workers,
            creation_ms=now_ms,
            start_ms=now_ms,
            last_modified_ms=now_ms,
            last_activity_s=now_ms / 1000,
        )
        eid = event_id(spec.name, 1, JOB, JobStatus.IN_PROGRESS.value)
        meta = {
            "pk": job_pk(spec.name),
            "sk": "#META",
            "arn": arn,
            "trial_path": spec.trial_path,
            "status": JobStatus.IN_PROGRESS.value,
            "seq": 1,
            "rules_rev": 1,
            "hook_config": spec.hook_config,
            "num_workers": spec.num_workers,
            "creation_time": now_ms,
            "start_time": now_ms,
            "last_modified": now_ms,
            "last_activity": now_ms / 1000,
            "steps_evaluated": 0,
            "gsi1pk": "ACTIVE",
            "gsi1sk": spec.name,
        }
        items = [
            {"Put": self.table.put_args(meta, "job_is_new")},
            {
                "Put": self.table.put_args(
                    {"pk": trial_pk(spec.trial_path), "sk": "#META", "job": spec.name},
                    "trial_unclaimed_or_ours",
                    {":job": spec.name},
                )
            },
            *(
                {"Put": self.table.put_args(_rule_item(spec.name, i, r, now_ms))}
                for i, r in enumerate(spec.rules)
            ),
            outbox_put(self.table, spec.name, _state_event(state, eid), now_ms),
        ]
        try:
            self.table.transact(items)
        except Conflict as exc:
            existing = self.table.load_job(spec.name)
            if existing is None:
                owner = self.table.job_for_trial(spec.trial_path)
                raise JobConflictError(
                    f"cannot register job {spec.name!r}: trial {spec.trial_path} belongs to job {owner!r}"
                ) from exc
            if existing.trial_path != spec.trial_path or [r.config for r in existing.rules] != list(
                spec.rules
            ):
                raise JobConflictError(
                    f"job {spec.name!r} is already registered with a different output path or rules; "
                    "call update_job_rules() to change its rules"
                ) from exc
            return "unchanged"
        for name, reason in (initial_errors or {}).items():
            self.apply(spec.name, lambda s, n=name, r=reason: to_error(s, n, r), now_ms)
        return "registered"

    def update_rules(self, job: str, rules: tuple[RuleConfig, ...], now_ms: int) -> JobState:
        """Replace a job's rules: unchanged rules keep their status, new or changed ones restart."""
        for _ in range(MAX_CONFLICTS):
            state = self.table.load_job(job)
            if state is None:
                raise JobConflictError(f"job {job!r} is not registered")
            if state.status in (JobStatus.COMPLETED, JobStatus.STOPPED, JobStatus.FAILED):
                raise JobConflictError(f"job {job!r} is {state.status.value}: its rules can no longer change")
            old = {r.config.name: r for r in state.rules}
            rev = state.rules_rev + 1
            new_rules = tuple(
                old[r.name]
                if r.name in old and old[r.name].config == r
                else RuleState(r, RuleStatus.IN_PROGRESS, "", now_ms)
                for r in rules
            )
            new_state = dataclasses.replace(
                state, rules=new_rules, rules_rev=rev, seq=state.seq + 1, last_modified_ms=now_ms
            )
            eid = event_id(job, rev, JOB, "RulesUpdated")
            items: list[dict[str, Any]] = [self._meta_update(state, now_ms, {"rules_rev": rev})]
            for i, r in enumerate(rules):
                if r.name in old and old[r.name].config == r:
                    items.append(
                        {
                            "Update": self.table.update_args(
                                job_pk(job),
                                f"#RULE#{r.name}",
                                "SET #o = :o",
                                {":o": i},
                                names={"#o": "order"},
                            )
                        }
                    )
                else:
                    items.append({"Put": self.table.put_args(_rule_item(job, i, r, now_ms))})
            for name in set(old) - {r.name for r in rules}:
                items.append(
                    {
                        "Delete": {
                            "TableName": self.table.name,
                            "Key": self.table.key(job_pk(job), f"#RULE#{name}"),
                        }
                    }
                )
            items.append(outbox_put(self.table, job, _state_event(new_state, eid), now_ms))
            try:
                self.table.transact(items)
            except Conflict:
                continue
            return new_state
        raise Conflict(["update_rules: too many concurrent changes"])

    # -- transitions -----------------------------------------------------------------------
    def apply(self, job: str, decide: Callable[[JobState], Change | None], now_ms: int) -> list[Change]:
        """Commit what ``decide`` asks for, one transaction (and one event) each, until it asks nothing."""
        applied: list[Change] = []
        conflicts = 0
        while True:
            state = self.table.load_job(job)
            if state is None:
                return applied
            change = decide(state)
            if change is None:
                return applied
            try:
                self._commit(state, change, now_ms)
            except Conflict as exc:
                conflicts += 1
                log.info("transition lost a race; re-reading", extra={"job": job, "reasons": exc.reasons})
                if conflicts >= MAX_CONFLICTS:
                    raise
                continue
            applied.append(change)

    def _meta_update(
        self, state: JobState, now_ms: int, sets: dict[str, Any], remove_gsi: bool = False
    ) -> dict:
        names: dict[str, str] = {}
        values: dict[str, Any] = {":seq": state.seq, ":next": state.seq + 1, ":now": now_ms}
        parts = ["seq = :next", "last_modified = :now"]
        for i, (k, v) in enumerate(sets.items()):
            names[f"#a{i}"] = k
            values[f":a{i}"] = v
            parts.append(f"#a{i} = :a{i}")
        expr = "SET " + ", ".join(parts) + (" REMOVE gsi1pk, gsi1sk" if remove_gsi else "")
        return {
            "Update": self.table.update_args(
                job_pk(state.name),
                "#META",
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
            new_state = dataclasses.replace(
                state,
                status=status,
                seq=state.seq + 1,
                last_modified_ms=now_ms,
                end_ms=now_ms if terminal else state.end_ms,
                failure_reason=change.failure_reason or state.failure_reason,
            )
            items = [self._meta_update(state, now_ms, sets, remove_gsi=terminal)]
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
                self._meta_update(state, now_ms, {}),
                {
                    "Update": self.table.update_args(
                        job_pk(state.name),
                        f"#RULE#{change.entity}",
                        rule_sets,
                        values,
                        condition="rule_in_expected_status",
                        names={"#status": "status"},
                    )
                },
            ]
        items.append(outbox_put(self.table, state.name, _state_event(new_state, eid), now_ms))
        items.extend(outbox_put(self.table, state.name, extra, now_ms) for extra in change.extra)
        self.table.transact(items)


def to_error(state: JobState, rule_name: str, reason: str) -> Change | None:
    """A still-evaluating rule -> Error with ``reason`` (registration-time validation failures)."""
    rule = state.rule(rule_name)
    if rule is None or rule.status not in (RuleStatus.IN_PROGRESS, RuleStatus.ISSUES_FOUND):
        return None
    return Change(rule_name, RuleStatus.ERROR.value, details=reason)

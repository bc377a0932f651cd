"""Registering a job and replacing its rules: one transaction each, with its outbox event.

Why here and not in the API: the configuration file (``tornasole_job.json``) and
the Python/CLI API must register identically, so both go through
``tornasole.evaluator.registration.job_registry.JobRegistry``, which validates and then calls
``Registrar``. Registration puts the job, its rules, the trial -> job mapping,
the registry entry and the InProgress event in one transaction (so a job holds
at most ``job_limits.MAX_RULES_PER_JOB`` rules) guarded by ``job_is_new`` and
``trial_unclaimed_or_ours``; a repeat with identical settings is ``unchanged``,
anything else is a ``JobConflictError`` (rule changes are ``update_rules``).

A configuration file that cannot be registered leaves a failed-registration
record in the registry partition (``record_failure``), so ``jobs list`` and
``describe`` show the reason; a later good registration of that name replaces it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tornasole.evaluator.models import JobSpec, JobState, JobStatus, RuleConfig, RuleState, RuleStatus
from tornasole.evaluator.registration.job_limits import TRANSACTION_MAX_ITEMS
from tornasole.evaluator.store.state_table import Conflict, StateTable, job_pk, trial_pk
from tornasole.evaluator.store.transitions import (
    JOB,
    MAX_CONFLICTS,
    Transitions,
    event_id,
    outbox_put,
    state_event,
    to_error,
)
from tornasole.exceptions import TornasoleValueError

__all__ = ["FAILURE_TTL_S", "JobConflictError", "Registrar", "REGISTRY_PK", "unnamed_failure_key"]

#: The registry partition: one item per job (``jobs list`` without a scan), or per failed registration.
REGISTRY_PK = "JOBS"
#: A failed registration stays listed this long (DynamoDB TTL), unless a good one replaces it first.
FAILURE_TTL_S = 30 * 24 * 3600
#: A failure reason is kept whole up to this many characters (every problem of a file, listed).
MAX_FAILURE_REASON = 8192


def unnamed_failure_key(trial_path: str) -> str:
    """Registry sort key of a failed registration with no usable job name (never a valid job name)."""
    return f"?{trial_path.rstrip('/')}"


class JobConflictError(TornasoleValueError):
    """Registering would change an existing job (use ``update_job_rules``) or steal another job's trial."""


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


class Registrar:
    """Creates jobs and replaces their rules over one ``StateTable``."""

    def __init__(self, table: StateTable) -> None:
        self.table = table
        self.transitions = Transitions(table)

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
            describe_fields=spec.describe_fields,
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
        if spec.describe_fields:
            meta["describe_fields"] = spec.describe_fields
        if spec.idle_timeout_s is not None:
            meta["idle_timeout_s"] = spec.idle_timeout_s
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
            # the jobs registry (``tornasole jobs list``): one partition, one item per job
            {"Put": self.table.put_args(self._registry_item(spec.name, spec.trial_path))},
            outbox_put(self.table, spec.name, state_event(state, eid), now_ms),
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
            self.transitions.apply(spec.name, lambda s, n=name, r=reason: to_error(s, n, r), now_ms)
        return "registered"

    @staticmethod
    def _registry_item(job: str, trial_path: str) -> dict[str, Any]:
        return {"pk": REGISTRY_PK, "sk": job, "trial_path": trial_path}

    def record_failure(self, name: str | None, trial_path: str, key: str, reason: str, now_ms: int) -> bool:
        """A failed registration, shown by ``jobs list`` and ``describe``; False if ``name`` is a live job.

        A registered job's entry is never overwritten (the bad file is then only the trial's error).
        """
        item = {
            "pk": REGISTRY_PK,
            "sk": name or unnamed_failure_key(trial_path),
            "trial_path": trial_path.rstrip("/"),
            "failure_reason": reason[:MAX_FAILURE_REASON],
            "failure_key": key,
            "failure_time": now_ms,
            "expires_at": now_ms // 1000 + FAILURE_TTL_S,  # a registered job's entry has no TTL
        }
        return self.table.put(item, "registry_free_or_failed")

    def forget_unnamed_failure(self, trial_path: str) -> None:
        """A job now owns the trial: a failure recorded for it without a name is settled."""
        self.table.client.delete_item(
            TableName=self.table.name, Key=self.table.key(REGISTRY_PK, unnamed_failure_key(trial_path))
        )

    def registry(self) -> list[dict[str, Any]]:
        """Every registry entry (jobs, and failed registrations carrying ``failure_reason``)."""
        return self.table.query(REGISTRY_PK, "")

    def registry_entry(self, name: str) -> dict[str, Any] | None:
        return self.table.get(REGISTRY_PK, name)

    def _move_items(self, state: JobState, trial_path: str) -> list[dict]:
        """The items that move a job to another trial path (mapping, registry entry)."""
        return [
            {
                "Put": self.table.put_args(
                    {"pk": trial_pk(trial_path), "sk": "#META", "job": state.name},
                    "trial_unclaimed_or_ours",
                    {":job": state.name},
                )
            },
            {
                "Delete": {
                    "TableName": self.table.name,
                    "Key": self.table.key(trial_pk(state.trial_path), "#META"),
                }
            },
            {"Put": self.table.put_args(self._registry_item(state.name, trial_path))},
        ]

    def update_rules(
        self, job: str, rules: tuple[RuleConfig, ...], now_ms: int, trial_path: str | None = None
    ) -> JobState:
        """Replace a job's rules: unchanged rules keep their status, new or changed ones restart.

        With ``trial_path`` (different from the registered one) the job also moves to that trial:
        its mapping, registry entry and hook configuration's S3OutputPath change in the same
        transaction, and a trial owned by another job is a ``JobConflictError``.
        """
        for _ in range(MAX_CONFLICTS):
            state = self.table.load_job(job)
            if state is None:
                raise JobConflictError(f"job {job!r} is not registered")
            if state.status in (JobStatus.COMPLETED, JobStatus.STOPPED, JobStatus.FAILED):
                raise JobConflictError(f"job {job!r} is {state.status.value}: its rules can no longer change")
            old = {r.config.name: r for r in state.rules}
            rev = state.rules_rev + 1
            moving = trial_path is not None and trial_path.rstrip("/") != state.trial_path
            removed = set(old) - {r.name for r in rules}
            count = 2 + len(rules) + len(removed) + (3 if moving else 0)
            if count > TRANSACTION_MAX_ITEMS:
                raise JobConflictError(
                    f"replacing {len(old)} rules by {len(rules)} ({len(removed)} removed) takes {count} "
                    f"items, over DynamoDB's {TRANSACTION_MAX_ITEMS} per transaction: update in two steps"
                )
            new_rules = tuple(
                old[r.name]
                if r.name in old and old[r.name].config == r
                else RuleState(r, RuleStatus.IN_PROGRESS, "", now_ms)
                for r in rules
            )
            sets: dict[str, Any] = {"rules_rev": rev}
            hook = state.hook_config
            if moving:
                assert trial_path is not None
                hook = {**(state.hook_config or {}), "S3OutputPath": trial_path.rstrip("/")}
                sets.update(trial_path=trial_path.rstrip("/"), hook_config=hook)
            new_state = dataclasses.replace(
                state,
                rules=new_rules,
                rules_rev=rev,
                seq=state.seq + 1,
                last_modified_ms=now_ms,
                trial_path=sets.get("trial_path", state.trial_path),
                hook_config=hook,
            )
            eid = event_id(job, rev, JOB, "RulesUpdated")
            items: list[dict[str, Any]] = [self.transitions.meta_update(state, now_ms, sets)]
            if moving:
                assert trial_path is not None
                items += self._move_items(state, trial_path.rstrip("/"))
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
            for name in removed:
                items.append(
                    {
                        "Delete": {
                            "TableName": self.table.name,
                            "Key": self.table.key(job_pk(job), f"#RULE#{name}"),
                        }
                    }
                )
            items.append(outbox_put(self.table, job, state_event(new_state, eid), now_ms))
            try:
                self.table.transact(items)
            except Conflict as exc:
                if moving and len(exc.reasons) > 1 and exc.reasons[1] == "ConditionalCheckFailed":
                    owner = self.table.job_for_trial(str(trial_path))
                    raise JobConflictError(
                        f"cannot move job {job!r} to {trial_path}: that trial belongs to job {owner!r}"
                    ) from exc
                continue
            return new_state
        raise Conflict(["update_rules: too many concurrent changes"])

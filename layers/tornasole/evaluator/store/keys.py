"""The single-table key layout, spelled in this module only.

Why one module: the same keys are written by registration, steps, transitions
and the outbox, and read back by the schedule, the jobs API and the tests. A
prefix spelled in seven places drifts; here each key has one builder (and, where
it is read back, one parser). The table design itself is documented in
``tornasole.evaluator.store.state_table``.

Steps are zero-padded to 12 digits so sort keys order by step; a larger step
never reaches a key (the evaluator rejects index keys that do not round-trip the
canonical layout, ``service.canonical_index_problem``).
"""

from __future__ import annotations

from typing import Any

from tornasole.stack_spec import DEFAULT_SPEC

__all__ = [
    "ACTIVE",
    "ALERT_PREFIX",
    "JOB_ITEMS_PREFIX",
    "JOBS_PK",
    "META",
    "OUTBOX",
    "OUTBOX_PREFIX",
    "ORPHAN_PREFIX",
    "PENDING",
    "PK",
    "RULE_PREFIX",
    "SK",
    "STEP_PREFIX",
    "alert_gate_sk",
    "TRIAL_ERROR",
    "eval_prefix",
    "eval_sk",
    "item",
    "job_pk",
    "orphan_sk",
    "outbox_gsi_sk",
    "outbox_sk",
    "parse_pending_gsi_sk",
    "pending_gsi_sk",
    "rule_sk",
    "step12",
    "step_sk",
    "trial_pk",
]

PK = DEFAULT_SPEC.table.partition_key
SK = DEFAULT_SPEC.table.sort_key

#: Sort key of a job's (or a trial's) own item.
META = "#META"
#: Every sort key of a job's own items (meta and rules) starts with this: one Query loads the job.
JOB_ITEMS_PREFIX = "#"
RULE_PREFIX = "#RULE#"
STEP_PREFIX = "STEP#"
EVAL_PREFIX = "EVAL#"
OUTBOX_PREFIX = "OUTBOX#"
ORPHAN_PREFIX = "ORPHAN#"
#: When an email/sms action of a job's rule last sent a message (reminders at most once per interval).
ALERT_PREFIX = "ALERT#"
TRIAL_ERROR = "#ERROR"
#: The registry partition of every job (listing jobs without a scan).
JOBS_PK = "JOBS"
# Partition keys of the sparse GSI.
ACTIVE = "ACTIVE"
PENDING = "PENDING"
OUTBOX = "OUTBOX"


def step12(step: int) -> str:
    return f"{step:012d}"


def job_pk(job: str) -> str:
    return f"JOB#{job}"


def trial_pk(trial_path: str) -> str:
    return f"TRIAL#{trial_path.rstrip('/')}"


def rule_sk(rule: str) -> str:
    return f"{RULE_PREFIX}{rule}"


def step_sk(step: int) -> str:
    return f"{STEP_PREFIX}{step12(step)}"


def eval_prefix(rule: str) -> str:
    return f"{EVAL_PREFIX}{rule}#"


def eval_sk(rule: str, step: int, rewrite: int | None = None) -> str:
    """A (rule, step) evaluation record; a step evaluated again because its index file was written again
    at ``rewrite`` (S3's write time, ms) has one more, after the first (``@<rewrite>``)."""
    return f"{eval_prefix(rule)}{step12(step)}" + (f"@{rewrite}" if rewrite is not None else "")


def outbox_sk(event_id: str) -> str:
    return f"{OUTBOX_PREFIX}{event_id}"


def alert_gate_sk(gate: str) -> str:
    return f"{ALERT_PREFIX}{gate}"


def orphan_sk(step: int, worker: str) -> str:
    return f"{ORPHAN_PREFIX}{step12(step)}#{worker}"


def pending_gsi_sk(job: str, step: int) -> str:
    return f"{job}#{step12(step)}"


def parse_pending_gsi_sk(value: str) -> tuple[str, int]:
    job, _, step = value.rpartition("#")
    return job, int(step)


def outbox_gsi_sk(created_ms: int, event_id: str) -> str:
    return f"{created_ms:013d}#{event_id}"


def item(pk: str, sk: str, **attrs: Any) -> dict[str, Any]:
    """An item with its key attributes named as the table spec names them."""
    return {PK: pk, SK: sk, **attrs}

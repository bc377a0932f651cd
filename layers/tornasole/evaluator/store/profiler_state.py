"""The profiler rules' states and the profiler files already folded into them, in the job's partition.

Items (sort keys under the job's ``JOB#<job>`` partition; none starts with ``#``, so loading the job
never reads them):

- ``PROF#STATE#<rule>``: the rule's JSON state (``tornasole.rules.profiler``), its ``version``, how many
  files it has folded (``files``) and its latest finding;
- ``PROF#FILE#<kind>/<name>``: one marker per profiler file folded, written in the SAME transaction as
  the states it changed, so a file is counted exactly once: a re-delivered notification finds its marker
  and changes nothing, a concurrent file makes the version condition fail and is re-read.

A corrupt file gets a marker with its error (so it is not retried forever) and touches no state.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tornasole.evaluator.store.item_limits import DYNAMODB_ITEM_BYTES, ItemTooLarge
from tornasole.evaluator.store.keys import META, PK, SK, item, job_pk, trial_pk
from tornasole.evaluator.store.state_table import Conflict, StateTable
from tornasole.profiler.format.paths import PROFILER_DIR

__all__ = [
    "ORPHAN_PREFIX",
    "MAX_STATE_BYTES",
    "ProfilerRuleState",
    "ProfilerStateStore",
    "file_sk",
    "state_sk",
]

ORPHAN_PREFIX = "PROFORPHAN#"
STATE_PREFIX = "PROF#STATE#"
FILE_PREFIX = "PROF#FILE#"
#: A rule's stored state at most (JSON text), leaving room in the 400 KB item for its other attributes.
MAX_STATE_BYTES = DYNAMODB_ITEM_BYTES - 16 * 1024


def state_sk(rule: str) -> str:
    return f"{STATE_PREFIX}{rule}"


def file_sk(relative_key: str) -> str:
    return f"{FILE_PREFIX}{relative_key}"


@dataclass(frozen=True)
class ProfilerRuleState:
    """One rule's stored state: the JSON state, its version (0: never written) and files folded."""

    rule: str
    state: dict[str, Any] | None
    version: int = 0
    files: int = 0
    fired: bool = False
    details: str = ""


class ProfilerStateStore:
    """Reads and commits the profiler rules' states of the jobs of one state table."""

    def __init__(self, table: StateTable) -> None:
        self.table = table

    def load(self, job: str) -> dict[str, ProfilerRuleState]:
        """Every profiler rule state of ``job`` (one Query)."""
        out = {}
        for it in self.table.query(job_pk(job), STATE_PREFIX):
            rule = it[SK][len(STATE_PREFIX) :]
            out[rule] = ProfilerRuleState(
                rule=rule,
                state=json.loads(it["state"]),
                version=int(it.get("version", 0)),
                files=int(it.get("files", 0)),
                fired=bool(it.get("fired", False)),
                details=str(it.get("details", "")),
            )
        return out

    # -- before registration -------------------------------------------------------------------
    def record_orphan(self, root: str, bucket: str, key: str, now_s: float) -> None:
        """A profiler file of a trial no job owns yet: kept (with the orphans' TTL) until one does."""
        from tornasole.evaluator.store.step_store import ORPHAN_TTL_S

        relative = key.rsplit(f"/{PROFILER_DIR}/", 1)[-1]
        body = item(trial_pk(root), f"{ORPHAN_PREFIX}{relative}", bucket=bucket, key=key)
        body["expires_at"] = int(now_s) + ORPHAN_TTL_S
        self.table.put(body)

    def take_orphans(self, root: str) -> list[tuple[str, str]]:
        """``(bucket, key)`` of the profiler files kept for ``root``, removed from the table."""
        items = self.table.query(trial_pk(root), ORPHAN_PREFIX)
        for i in items:
            self.table.client.delete_item(TableName=self.table.name, Key=self.table.key(i[PK], i[SK]))
        return [(i["bucket"], i["key"]) for i in items]

    def note_error(self, job: str, reason: str) -> None:
        """Show a corrupt file on the job (``TornasoleJobError`` in describe and the events), unless the
        job already shows an error: the first one stays."""
        try:
            self.table.update(
                job_pk(job), META, "SET job_error = :r", {":r": reason[:1024]}, condition="job_error_unset"
            )
        except Conflict:
            pass

    def file_seen(self, job: str, relative_key: str) -> dict[str, Any] | None:
        return self.table.get(job_pk(job), file_sk(relative_key))

    def files_folded(self, job: str, rule: str) -> int:
        it = self.table.get(job_pk(job), state_sk(rule))
        return int(it.get("files", 0)) if it else 0

    def commit(
        self,
        job: str,
        relative_key: str,
        updates: list[tuple[ProfilerRuleState, dict[str, Any], bool, str]],
        now_ms: int,
        error: str | None = None,
    ) -> bool:
        """Record the file and the rules' new states (``(previous, state, fired, details)``) atomically.

        False: the file was already recorded (a re-delivery). ``Conflict``: a state changed since it was
        read (the caller re-reads and folds the file again). ``ItemTooLarge``: a state outgrew DynamoDB's
        item (the table enforces it; moto would not)."""
        pk = job_pk(job)
        marker = item(pk, file_sk(relative_key), at=now_ms, rules=len(updates))
        if error:
            marker["error"] = error[:1000]
        ops: list[dict[str, Any]] = [{"Put": self.table.put_args(marker, "profiler_file_is_new")}]
        for previous, state, fired, details in updates:
            text = json.dumps(state, separators=(",", ":"), allow_nan=False)
            if len(text) > MAX_STATE_BYTES:
                raise ItemTooLarge(
                    f"profiler rule {previous.rule}: state of {len(text)} bytes exceeds {MAX_STATE_BYTES}"
                )
            body = item(
                pk,
                state_sk(previous.rule),
                state=text,
                version=previous.version + 1,
                files=previous.files + 1,
                fired=fired,
                details=details[:1024],
                last_key=relative_key[:512],
                updated=now_ms,
            )
            ops.append(
                {"Put": self.table.put_args(body, "profiler_state_unchanged", {":version": previous.version})}
            )
        try:
            self.table.transact(ops)
        except Conflict as exc:
            if exc.reasons and exc.reasons[0] == "ConditionalCheckFailed":
                return False  # the file's marker exists: folded before
            raise
        return True

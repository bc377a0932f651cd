"""What the evaluator does when a profiler file lands under ``<trial>/profiler-output/``.

One S3 notification per file, one evaluation per file: the file is read once (it is written whole when
it closes), decoded by :mod:`tornasole.profiler.format`, and folded into each of the job's profiler
rules' bounded states (:mod:`tornasole.rules.profiler`), which live in the job's DynamoDB partition
(``store.profiler_state``). The file's marker and the new states are one transaction, so a re-delivered
notification changes nothing and two files landing at once are both counted (the loser re-reads).
A rule that fires moves to ``IssuesFound`` through the same transitions as the tensor rules (one
transaction with its state-change event, whose detail lists it under ``ProfilerRuleEvaluationStatuses``),
and its notifying actions alert. A corrupt file is recorded with an error naming it and touches no
state: later files are evaluated as if it had not come.

Where the trial is: the hook writes ``<trial>/profiler-output/``; SageMaker's own profiler writes
``<S3OutputPath>/<job>/profiler-output``, beside ``debug-output``: a file there belongs to the job whose
trial is ``<S3OutputPath>/<job>/debug-output``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tornasole.evaluator import decisions
from tornasole.evaluator.details import clip
from tornasole.evaluator.failures import raise_if_transient
from tornasole.evaluator.models import (
    EVALUATING,
    TERMINAL_JOB,
    JobState,
    JobStatus,
    ObjectAction,
    ObjectKind,
    ObjectResult,
    RuleStatus,
    StepOutcome,
)
from tornasole.evaluator.store.profiler_state import ProfilerRuleState, ProfilerStateStore
from tornasole.evaluator.store.state_table import Conflict, StateTable
from tornasole.evaluator.store.transitions import JOB, Change, Transitions
from tornasole.evaluator.store.trial_owners import TrialOwners
from tornasole.exceptions import FormatError, TornasoleValueError
from tornasole.profiler.format import paths as profiler_paths
from tornasole.profiler.format.system_records import decode_records
from tornasole.profiler.format.trace_events import decode_trace_file

__all__ = ["MAX_PROFILER_FILE_BYTES", "ProfilerFiles", "profiler_trial_candidates"]

log = logging.getLogger(__name__)

#: The largest profiler file read (a 60 s system file of 8 cores + 8 GPUs at 100 ms is about 1 MB).
MAX_PROFILER_FILE_BYTES = 32 * 1024 * 1024
#: Lost races (another file of the same job committed first) before the invocation gives up and the
#: notification is retried.
MAX_STATE_CONFLICTS = 20
_MARKER = f"/{profiler_paths.PROFILER_DIR}/"


def kind_of(key: str) -> str:
    return profiler_paths.profiler_file_kind(key) or ""


def relative_of(key: str) -> str:
    return key[("/" + key).rfind(_MARKER) + len(_MARKER) - 1 :]


def profiler_trial_candidates(bucket: str, key: str) -> tuple[str, str] | None:
    """``(trial, relative key)`` candidates of a profiler file: the trial is the folder above
    ``profiler-output`` (or, SageMaker's layout, that folder's ``debug-output``), or None for a key
    outside any ``profiler-output``."""
    at = ("/" + key).rfind(_MARKER)
    if at < 0:
        return None
    root = key[: max(at - 1, 0)] if at > 0 else ""
    relative = key[at + len(_MARKER) - 1 :]
    return (f"s3://{bucket}/{root}" if root else f"s3://{bucket}"), relative


class ProfilerFiles:
    """Profiler files of the trials of one state table, folded into their jobs' profiler rules."""

    def __init__(
        self,
        table: StateTable,
        transitions: Transitions,
        trials: TrialOwners,
        clock: Callable[[], float],
        max_bytes: int = MAX_PROFILER_FILE_BYTES,
    ) -> None:
        self.table = table
        self.transitions = transitions
        self.trials = trials
        self.clock = clock
        self.max_bytes = max_bytes
        self.store = ProfilerStateStore(table)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _job_for(self, root: str) -> str | None:
        job = self.trials.job_for_trial(root)
        if job is None and not root.endswith("/debug-output"):
            job = self.trials.job_for_trial(f"{root}/debug-output")
        return job

    def handle(self, bucket: str, key: str) -> ObjectResult:
        kind = profiler_paths.profiler_file_kind(key)
        where = profiler_trial_candidates(bucket, key)
        if kind is None or where is None:
            return ObjectResult(
                key, ObjectKind.PROFILER, ObjectAction.INVALID, reason=f"{key}: not a profiler file"
            )
        root, relative = where
        job = self._job_for(root)
        if job is None:
            self.store.record_orphan(root, bucket, key, self.clock())
            # Registration claims the trial first: re-read the claim now that the orphan is written, so a
            # registration that ran meanwhile is seen here (or its job's next file adopts the orphan).
            job = self._job_for(root)
            if job is None:
                log.info("profiler file of a trial no job is registered for; kept", extra={"key": key})
                return ObjectResult(
                    key, ObjectKind.PROFILER, ObjectAction.ORPHAN, reason=f"no job registered for {root}"
                )
        result = self._evaluate(job, bucket, key, kind, relative)
        for orphan_bucket, orphan_key in self.store.take_orphans(root):  # files that came before the job
            try:
                adopted = self._evaluate(
                    job, orphan_bucket, orphan_key, kind_of(orphan_key), relative_of(orphan_key)
                )
            except Exception:  # noqa: BLE001 - this file's own result stands; the orphan is kept for the next
                log.exception("adopting a profiler file failed; kept", extra={"job": job, "key": orphan_key})
                self.store.record_orphan(root, orphan_bucket, orphan_key, self.clock())
                continue
            log.info("adopted a profiler file: %s", adopted.action, extra={"job": job, "key": orphan_key})
        return result

    def _evaluate(self, job: str, bucket: str, key: str, kind: str, relative: str) -> ObjectResult:
        state = self.table.load_job(job)
        if state is None or state.status in TERMINAL_JOB:
            why = "unknown job" if state is None else f"job is {state.status.value}"
            return ObjectResult(key, ObjectKind.PROFILER, ObjectAction.IGNORED, job=job, reason=why)
        rules = [r for r in state.rules if r.config.profiler and r.status in EVALUATING]
        if not rules:
            return ObjectResult(
                key, ObjectKind.PROFILER, ObjectAction.IGNORED, job=job, reason="no profiler rule to evaluate"
            )
        if self.store.file_seen(job, relative) is not None:
            return ObjectResult(
                key, ObjectKind.PROFILER, ObjectAction.DUPLICATE, job=job, reason="file already evaluated"
            )
        path = f"s3://{bucket}/{key}"
        try:
            payload = self._read(path, kind)
        except (FormatError, OSError, ValueError) as exc:
            raise_if_transient(exc)
            why = clip(f"{path}: unreadable profiler file, not evaluated: {exc}")
            log.warning(why, extra={"job": job, "key": key})
            recorded = self.store.commit(job, relative, [], self.now_ms(), error=why)
            if recorded:
                self.store.note_error(job, why)
            action = ObjectAction.INVALID if recorded else ObjectAction.DUPLICATE
            return ObjectResult(key, ObjectKind.PROFILER, action, job=job, reason=why)
        return self._fold(state, key, relative, kind, payload, rules)

    def _read(self, path: str, kind: str):
        from tornasole.storage import get_storage

        data = get_storage(path).read(path, 0, self.max_bytes + 1)
        if len(data) > self.max_bytes:
            raise ValueError(f"larger than {self.max_bytes} bytes")
        if kind == "system":
            return decode_records(data, source=path)
        return decode_trace_file(data, source=path)

    def _fold(self, state: JobState, key: str, relative: str, kind: str, payload, rules) -> ObjectResult:
        from tornasole.rules.profiler import create_profiler_rule
        from tornasole.rules.profiler.base import samples_of

        job = state.name
        samples = samples_of(payload) if kind == "system" else None  # grouped once for every rule
        for _ in range(MAX_STATE_CONFLICTS):
            stored = self.store.load(job)
            updates, outcomes = [], []
            for r in rules:
                name = r.config.name
                previous = stored.get(name) or ProfilerRuleState(rule=name, state=None)
                try:
                    rule = create_profiler_rule(r.config.rule_to_invoke, r.config.parameters)
                    folded = previous.state if previous.state is not None else rule.initial_state()
                    rule.update(folded, kind, payload, samples)
                    found = rule.finding(folded)
                except TornasoleValueError as exc:  # checked at registration; an old job may still hold one
                    outcomes.append(StepOutcome(name, 0, error=clip(f"{name}: {exc}")))
                    continue
                updates.append((previous, folded, found.fired, found.details))
                outcomes.append(
                    StepOutcome(name, 0, fired=found.fired, details=found.details, values=found.values)
                )
            try:
                committed = self.store.commit(job, relative, updates, self.now_ms())
            except Conflict:
                continue  # another file of this job committed first: fold this one into its states
            if not committed:
                return ObjectResult(
                    key, ObjectKind.PROFILER, ObjectAction.DUPLICATE, job=job, reason="file already evaluated"
                )
            # a decision on statuses alone: the read above may start it (a stale one conflicts and re-reads)
            self.transitions.apply(job, after_profiler_findings(outcomes, key), self.now_ms(), state=state)
            fired = sorted(o.rule_name for o in outcomes if o.fired)
            return ObjectResult(
                key,
                ObjectKind.PROFILER,
                ObjectAction.EVALUATED,
                job=job,
                reason=f"{kind} file folded into {len(updates)} profiler rule(s); firing: {fired or 'none'}",
                outcomes=tuple(outcomes),
            )
        raise Conflict([f"{key}: lost {MAX_STATE_CONFLICTS} races for the profiler states of {job}"])


def after_profiler_findings(outcomes: list[StepOutcome], key: str):
    """The decision after a profiler file: a broken rule -> Error; a first firing -> IssuesFound (its
    notifying actions alert); a firing rule with a ``stoptraining`` action stops the job."""

    def decide(state: JobState) -> Change | None:
        if state.status not in (JobStatus.IN_PROGRESS, JobStatus.STOPPING):
            return None
        for o in sorted(outcomes, key=lambda o: o.rule_name):
            rule = state.rule(o.rule_name)
            if rule is None or rule.status != RuleStatus.IN_PROGRESS:
                continue
            if o.error:
                return Change(o.rule_name, RuleStatus.ERROR.value, details=clip(o.error))
            if o.fired:
                files = {
                    "TrialPath": state.trial_path,
                    "IndexFiles": [],
                    "EventFiles": [],
                    "ProfilerFile": key,
                }
                where = (o.rule_name, None, None, None)
                alerts = decisions.alert_items(state, where, o.details, o.values, files, "profiler")
                return Change(
                    o.rule_name, RuleStatus.ISSUES_FOUND.value, details=clip(o.details), extra=tuple(alerts)
                )
        if state.status == JobStatus.IN_PROGRESS:
            for o in sorted(outcomes, key=lambda o: o.rule_name):
                if o.fired and not o.error and decisions.wants_stop(state, o.rule_name):
                    reason = f"{o.rule_name} fired on {key} with a stoptraining action"
                    return Change(
                        JOB,
                        JobStatus.STOPPING.value,
                        extra=(decisions.stop_item(state, o.rule_name, None, reason),),
                    )
        return None

    return decide

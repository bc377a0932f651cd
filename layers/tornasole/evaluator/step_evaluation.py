"""One step of one job: count its attempts, evaluate its rules once every worker is in, record it all.

Split from ``service``: ``process_step`` records a worker's arrival and, once the step is complete,
claims an attempt (``MAX_STEP_ATTEMPTS`` at most, then the step is recorded as an error for every
rule); ``evaluate_step`` runs the evaluating rules (``runner``; custom rules through the configured
runner) and writes their outcomes, transitions and the step's settlement; ``complete`` applies the
completion decision. ``StepEvaluation`` holds the collaborators it uses: the state table, the step
store, the transitions, the rule runner and the clock.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from tornasole.evaluator import decisions
from tornasole.evaluator.details import clip, describe
from tornasole.evaluator.failures import UnusableCollections
from tornasole.evaluator.models import (
    EVALUATING,
    TERMINAL_JOB,
    JobState,
    JobStatus,
    ObjectAction,
    ObjectKind,
    ObjectResult,
    StepOutcome,
    rule_source_problem,
)
from tornasole.evaluator.runner import StepFiles, StepRunner
from tornasole.evaluator.store.profiler_state import ProfilerStateStore
from tornasole.evaluator.store.state_table import StateTable
from tornasole.evaluator.store.step_store import MAX_STEP_ATTEMPTS, StepRecord, StepStore
from tornasole.evaluator.store.transitions import JOB, Change, Transitions
from tornasole.evaluator.workers import discover_num_workers

__all__ = ["REWRITTEN", "StepEvaluation"]

log = logging.getLogger(__name__)

Remaining = Callable[[], float] | None
#: The reason of an evaluated step's result when it was evaluated again for a rewrite of its index file.
REWRITTEN = "written again: evaluated again"
#: Writes an ended job's report: (its final detail, rule -> steps where it fired) -> where, or None.
ReportWriter = Callable[[dict[str, Any], dict[str, list[int]]], "str | None"]


class StepEvaluation:
    """Steps of jobs on one state table: arrivals counted, rules run once a step is complete, all recorded."""

    def __init__(
        self,
        table: StateTable,
        steps: StepStore,
        transitions: Transitions,
        runner: StepRunner,
        clock: Callable[[], float],
        allowed_rule_prefixes: tuple[str, ...] | None = None,
        report_writer: ReportWriter | None = None,
    ) -> None:
        self.table = table
        self.steps = steps
        self.transitions = transitions
        self.runner = runner
        self.clock = clock
        self.allowed_rule_prefixes = allowed_rule_prefixes
        self.report_writer = report_writer

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def num_workers(self, state: JobState) -> int | None:
        """The job's ``num_workers`` from its collections file (``workers.discover_num_workers``)."""
        return discover_num_workers(self.steps, self.transitions, self.clock, state)

    def process_step(
        self,
        job: str,
        step: int,
        worker: str | None = None,
        key: str = "",
        remaining_s: Remaining = None,
        redrive: bool = False,
        written_ms: int | None = None,
    ) -> ObjectResult:
        """Record the worker's arrival; evaluate the step once every worker's index file is there.

        Failed attempts are counted on the step (one that raised; a ``redrive`` by the scheduled check
        replaces one that died); after ``MAX_STEP_ATTEMPTS`` the step is recorded as an error for every
        rule, and the rules go on with later steps. ``written_ms``: S3's write time of the worker's index
        file; an evaluated step whose index file was written again later is evaluated again
        (``reevaluate``), a re-delivered notification is a duplicate.
        """
        state = self.table.load_job(job)
        if state is None or state.status in TERMINAL_JOB:
            why = "unknown job" if state is None else f"job is {state.status.value}"
            return ObjectResult(key, ObjectKind.INDEX, ObjectAction.IGNORED, job=job, step=step, reason=why)
        rec = (
            self.steps.record_worker(job, step, worker, self.clock(), written_ms)
            if worker
            else self.steps.step(job, step)
        )
        if rec is None:
            return ObjectResult(
                key, ObjectKind.INDEX, ObjectAction.IGNORED, job=job, step=step, reason="step not recorded"
            )
        try:
            num_workers = state.num_workers or self.num_workers(state)
        except UnusableCollections as exc:  # the job's rules already say why; the step is settled
            why = f"step {step}: {exc}"
            outcomes = self.record_step_error(self.table.load_job(job) or state, step, why)
            return ObjectResult(
                key, ObjectKind.INDEX, ObjectAction.INVALID, job=job, step=step, reason=why, outcomes=outcomes
            )
        if num_workers is None:
            self.steps.mark_pending(job, step, self.now_ms())
            # The collections file's handler re-drives the PENDING steps. If it ran between the listing above
            # and the marking, it missed this step: look once more, now that the step is on the index (either
            # that handler sees the step, or this listing sees its file).
            num_workers = self.num_workers(state)
        if num_workers is None:
            return ObjectResult(
                key,
                ObjectKind.INDEX,
                ObjectAction.WAITING,
                job=job,
                step=step,
                reason="no collections file yet",
            )
        if len(rec.workers) < num_workers:
            return ObjectResult(
                key,
                ObjectKind.INDEX,
                ObjectAction.INCOMPLETE,
                job=job,
                step=step,
                reason=f"{len(rec.workers)} of {num_workers} workers",
            )
        if rec.evaluated and worker and decisions.is_rewrite(rec.written.get(worker), written_ms):
            assert written_ms is not None
            outcomes = self.reevaluate(state, rec, worker, written_ms, num_workers, remaining_s)
            return ObjectResult(
                key,
                ObjectKind.INDEX,
                ObjectAction.EVALUATED,
                job=job,
                step=step,
                reason=REWRITTEN,
                outcomes=tuple(outcomes),
            )
        # begin_attempt is conditional too: None when another delivery evaluated the step meanwhile
        attempts = None if rec.evaluated else self.steps.begin_attempt(job, step, self.now_ms(), redrive)
        if attempts is None:
            return ObjectResult(
                key,
                ObjectKind.INDEX,
                ObjectAction.DUPLICATE,
                job=job,
                step=step,
                reason="step already evaluated",
            )
        if attempts >= MAX_STEP_ATTEMPTS:
            last = self.steps.step(job, step)
            why = f"step {step} could not be evaluated in {MAX_STEP_ATTEMPTS} attempts" + (
                f"; last error: {last.last_error}" if last and last.last_error else ""
            )
            outcomes = self.record_step_error(state, step, why)
            return ObjectResult(
                key, ObjectKind.INDEX, ObjectAction.GAVE_UP, job=job, step=step, reason=why, outcomes=outcomes
            )
        try:
            outcomes = self.evaluate_step(state, rec, num_workers, remaining_s)
        except Exception as exc:
            self.steps.note_failure(job, step, f"{type(exc).__name__}: {exc}", self.now_ms())
            raise
        return ObjectResult(
            key, ObjectKind.INDEX, ObjectAction.EVALUATED, job=job, step=step, outcomes=tuple(outcomes)
        )

    def reevaluate(
        self,
        state: JobState,
        rec: StepRecord,
        worker: str,
        written_ms: int,
        num_workers: int,
        remaining_s: Remaining = None,
    ) -> list[StepOutcome]:
        """Evaluate an evaluated step again because ``worker``'s index file was written again at
        ``written_ms`` (a resumed run re-saving its steps into the same keys): on fresh reads (the runner
        forgets what it cached of the step's files), each outcome recorded beside the first one
        (``rewrite``), a finding a new issue; the step is not counted again. The write is noted last, so
        an attempt that dies is evaluated again by S3's retry of the same notification (records are
        written once)."""
        self.runner.forget(state.trial_path, rec.step, sorted(rec.workers))
        self.runner.note_written(state.trial_path, rec.step, {**rec.written, worker: written_ms})
        outcomes = self.evaluate_step(state, rec, num_workers, remaining_s, rewrite=written_ms)
        self.steps.note_rewritten(state.name, rec.step, worker, written_ms)
        return outcomes

    def record_step_error(self, state: JobState, step: int, why: str) -> tuple[StepOutcome, ...]:
        """Record ``why`` against ``step`` for every evaluating rule and count the step as settled."""
        outcomes = tuple(
            StepOutcome(r.config.name, step, step_error=why)
            for r in state.rules
            if r.status in EVALUATING and r.config.rule_to_invoke != decisions.STALLED_RULE
        )
        now = self.now_ms()
        self.steps.record_evaluations(state.name, [(o, []) for o in outcomes], now)
        self._settle(state.name, step, now)
        return outcomes

    def _settle(self, job: str, step: int, now: int) -> None:
        """Count ``step`` as evaluated; try to complete the job only once its end marker may be there."""
        marked = self.steps.mark_evaluated_before_end(job, step, now)  # True: the job cannot complete yet
        if marked is None:
            self.steps.mark_evaluated(job, step, now)
        if marked is not True:
            self.complete(job)

    def complete(self, job: str) -> list:
        """Apply ``decisions.completion`` with each still-InProgress rule's count of evaluated steps
        (queried only once the job is otherwise ready to complete)."""
        counts: dict[str, int] = {}
        unreadable: dict[str, int] = {}
        step_errors: dict[str, int] = {}
        reports: dict[str, str | None] = {}  # rendered once, even when the transition is retried

        def decide(state: JobState):
            if not decisions.ready_to_complete(state):
                return None
            for r in state.rules:
                if r.config.name not in counts and r.config.profiler:  # files folded, not steps
                    counts[r.config.name] = ProfilerStateStore(self.table).files_folded(job, r.config.name)
                if r.config.name not in counts:
                    counts[r.config.name] = self.steps.count_evaluated(job, r.config.name)
                if counts[r.config.name] == 0 and r.config.name not in unreadable:  # only then it matters
                    unreadable[r.config.name] = self.steps.count_unreadable(job, r.config.name)
            change = decisions.completion(state, counts, unreadable)
            if change is not None and change.entity == JOB:
                if change.status not in reports:
                    reports[change.status] = self._write_report(state, change)
                return dataclasses.replace(change, report_location=reports[change.status])
            if change is None or change.entity not in counts:
                return change
            # a final status says how many steps the rule could not judge (#34 N13)
            if change.entity not in step_errors:
                step_errors[change.entity] = self.steps.count_step_errors(job, change.entity)
            n = step_errors[change.entity]
            if not n or "could not be read" in (change.details or ""):  # an Error that says so already
                return change
            told = (
                f"; {n} step{'s' * (n != 1)} unreadable, incomplete or given up "
                f"(`tornasole jobs status {job}`)"
            )
            return dataclasses.replace(change, details=clip(change.details + told))

        return self.transitions.apply(job, decide, self.now_ms())

    def _write_report(self, state: JobState, change: Change) -> str | None:
        """The ended job's report, written before its terminal transition so the event can say where;
        None (the event's ``TornasoleReportLocation`` is null) when there is no writer or it failed:
        a report never stops a job from completing."""
        if self.report_writer is None:
            return None
        final = dataclasses.replace(
            state,
            status=JobStatus(change.status),
            end_ms=self.now_ms(),
            failure_reason=change.failure_reason or state.failure_reason,
        )
        try:
            fired = {r.config.name: self.steps.fired_steps(state.name, r.config.name) for r in state.rules}
            return self.report_writer(describe(final), fired)
        except Exception:  # noqa: BLE001 - logged; the job completes without a report
            log.exception("the report of job %s was not written", state.name)
            return None

    def evaluate_step(
        self,
        state: JobState,
        rec: StepRecord,
        num_workers: int,
        remaining_s: Remaining = None,
        rewrite: int | None = None,
    ) -> list[StepOutcome]:
        """Run the step's evaluating rules and record their outcomes (``rewrite``: tagged as the
        evaluation of the step written again then, and the step not counted again)."""
        step = rec.step
        configs = [
            r.config
            for r in state.rules
            if r.status in EVALUATING
            and r.config.active_at(step)
            and r.config.rule_to_invoke != decisions.STALLED_RULE
            and not r.config.profiler  # profiler rules read profiler files (``profiler_files``), not steps
        ]
        # a custom rule whose source is outside the allowed prefixes is never loaded (also checked here, not
        # only at registration: a job registered through the API must not bypass it)
        refused = {c.name: rule_source_problem(c, self.allowed_rule_prefixes) for c in configs}
        outcomes = [StepOutcome(name, step, error=why) for name, why in refused.items() if why]
        configs = [c for c in configs if not refused[c.name]]
        recorded: list[StepOutcome] = []  # the built-in rules' outcomes, when recorded before the custom ones
        if configs:
            if rewrite is None:  # (``reevaluate`` noted the rewrite's own time)
                self.runner.note_written(state.trial_path, step, rec.written)

            def history(depth: int, lead: int) -> list[tuple[int, tuple[str, ...]]]:
                recent = self.steps.previous_steps(state.name, step, depth)
                seen = {p.step for p in recent}
                first = [p for p in self.steps.first_steps(state.name, step, lead) if p.step not in seen]
                complete = [p for p in recent + first if len(p.workers) >= num_workers]
                for p in complete:  # a step another process saw rewritten: this runner's copies are stale
                    self.runner.note_written(state.trial_path, p.step, p.written)
                return [(p.step, tuple(sorted(p.workers))) for p in complete]

            files = StepFiles(step, tuple(sorted(rec.workers)))
            builtins = [c for c in configs if not c.source_s3_uri]
            customs = [c for c in configs if c.source_s3_uri]
            if builtins and customs:
                # the built-in rules' outcomes are recorded before any custom rule runs: a custom rule that
                # outlives the invocation or kills it costs its own outcome only (#34 N5); a re-drive finds
                # them recorded (records are written once) and runs the step again
                recorded = self.runner.run(
                    state.name, state.trial_path, files, builtins, history, remaining_s
                )
                recorded = self._record(state, rec, recorded, settle=False, rewrite=rewrite)
                state = self.table.load_job(state.name) or state
                configs = customs
            outcomes += self.runner.run(state.name, state.trial_path, files, configs, history, remaining_s)
        outcomes = self._record(state, rec, outcomes, settle=rewrite is None, rewrite=rewrite)
        return recorded + outcomes

    def _record(
        self,
        state: JobState,
        rec: StepRecord,
        outcomes: list[StepOutcome],
        settle: bool,
        rewrite: int | None = None,
    ) -> list[StepOutcome]:
        """Record ``outcomes`` (records, their outbox items, the rules' transitions); with ``settle``, count
        the step as evaluated too; with ``rewrite``, as the outcomes of the step written again then."""
        if rewrite is not None:
            outcomes = [dataclasses.replace(o, rewrite=rewrite) for o in outcomes]
        step = rec.step
        now = self.now_ms()
        batch = [
            (o, decisions.issue_extras(state, o, sorted(rec.workers)) if o.fired and not o.error else [])
            for o in outcomes
        ]
        # No issue (so no outbox item, no refine) and no transition (apply's first look): one transaction.
        quiet = not any(o.fired and not o.error for o in outcomes)
        if (
            settle
            and quiet
            and decisions.after_outcomes(outcomes)(state) is None
            and self.steps.record_and_mark_before_end(state.name, outcomes, step, now)
        ):
            return outcomes  # recorded and counted; the job cannot complete before its end marker
        self.steps.record_evaluations(state.name, batch, now)
        self.transitions.apply(state.name, decisions.after_outcomes(outcomes), now, state=state)
        for o in outcomes:
            if o.fired and not o.error:
                self.steps.refine_issue(state.name, o.rule_name, step, o.details)
        if settle:
            self._settle(state.name, step, now)
        return outcomes

"""The evaluator's entry points: one S3 object in, state and outbox items out.

``handle_object_created(bucket, key)`` dispatches on the key's shape (S3
filters only allow a prefix and a suffix): an index file is a (step, worker)
arrival, a collections file gives ``num_workers``, the end marker starts
completion, ``tornasole_job.json`` registers the job. Everything is idempotent
(see ``state`` / ``steps`` / ``transitions``), so duplicated, reordered,
concurrent or retried notifications converge to the same state and the same
set of events. Per step the cost is bounded by workers and rules: one worker
update, one bounded history query, the step's index files and the rules'
records; nothing is listed except once per job at the end marker, to learn how
many steps training wrote (notifications may still be in flight).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tornasole.evaluator import completion, decisions
from tornasole.evaluator.failures import raise_if_transient
from tornasole.evaluator.models import (
    EVALUATING,
    TERMINAL_JOB,
    JobState,
    ObjectAction,
    ObjectKind,
    ObjectResult,
    StepOutcome,
    rule_source_problem,
)
from tornasole.evaluator.objects import canonical_index_problem, read_capped, trial_path_of
from tornasole.evaluator.outbox import OutboxPublisher
from tornasole.evaluator.runner import StepFiles, StepRunner
from tornasole.evaluator.schedule import CheckReport, run_scheduled_check
from tornasole.evaluator.state import StateTable
from tornasole.evaluator.steps import MAX_STEP_ATTEMPTS, StepRecord, StepStore
from tornasole.evaluator.transitions import Transitions
from tornasole.format import paths
from tornasole.stack_spec import END_MARKER_FILE, JOB_CONFIG_FILE, STOP_SIGNAL_FILE

Remaining = Callable[[], float] | None  # seconds left in the invocation (None: no deadline known)

if TYPE_CHECKING:
    from tornasole.lambda_support.env import HandlerEnv

__all__ = ["Evaluator", "CheckReport", "trial_path_of"]

log = logging.getLogger(__name__)

MAX_REMEMBERED_TRIALS = 10_000


class Evaluator:
    """Stateless service over the state table; build once per process (``from_env``)."""

    def __init__(
        self,
        table: StateTable,
        publisher: OutboxPublisher | None = None,
        runner: StepRunner | None = None,
        clock: Callable[[], float] = time.time,
        allowed_rule_prefixes: tuple[str, ...] | None = None,
        trial_prefix: str = "",
        trial_bucket: str | None = None,
    ) -> None:
        self.table = table
        self.steps = StepStore(table)
        self.transitions = Transitions(table)
        self.publisher = publisher or OutboxPublisher(table)
        self.runner = runner or StepRunner()
        self.clock = clock
        self.allowed_rule_prefixes = allowed_rule_prefixes
        self.trial_prefix = trial_prefix
        self.trial_bucket = trial_bucket
        self._trial_jobs: dict[str, str] = {}  # trial path -> job, once known (see job_for_trial)

    @classmethod
    def from_env(cls, env: HandlerEnv) -> Evaluator:
        table = StateTable(env.state_table)
        return cls(
            table,
            OutboxPublisher.from_env(env),
            allowed_rule_prefixes=env.allowed_rule_prefixes,
            trial_prefix=env.trial_prefix,
            trial_bucket=env.trial_bucket,
        )

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def job_for_trial(self, trial_path: str) -> str | None:
        """The job owning ``trial_path``, remembered once found: a trial is claimed by one job for good
        (``trial_unclaimed_or_ours``), so a warm process saves one GetItem per step. "None" is not kept."""
        job = self._trial_jobs.get(trial_path)
        if job is None:
            job = self.table.job_for_trial(trial_path)
            if job is not None and len(self._trial_jobs) < MAX_REMEMBERED_TRIALS:
                self._trial_jobs[trial_path] = job
        return job

    # -- dispatch ---------------------------------------------------------------------------
    def handle_object_created(self, bucket: str, key: str, remaining_s: Remaining = None) -> ObjectResult:
        """Dispatch one object; ``remaining_s()``: the invocation's remaining seconds (rule deadlines)."""
        name = key.rsplit("/", 1)[-1]
        if self.trial_bucket and bucket != self.trial_bucket:
            log.warning("ignoring an object of a foreign bucket", extra={"bucket": bucket, "key": key})
            return ObjectResult(
                key,
                ObjectKind.IGNORED,
                ObjectAction.IGNORED,
                reason=f"not the trial bucket {self.trial_bucket!r}",
            )
        if not key.startswith(self.trial_prefix):
            log.info(
                "ignoring object outside the trial prefix", extra={"key": key, "prefix": self.trial_prefix}
            )
            return ObjectResult(
                key,
                ObjectKind.IGNORED,
                ObjectAction.IGNORED,
                reason=f"outside the trial prefix {self.trial_prefix!r}",
            )
        if name == JOB_CONFIG_FILE:
            return self.register_from_file(trial_path_of(bucket, key, 1), key)
        if name == END_MARKER_FILE:
            return self.handle_end_marker(trial_path_of(bucket, key, 1), key)
        if name == STOP_SIGNAL_FILE:
            return ObjectResult(
                key, ObjectKind.STOP_SIGNAL, ObjectAction.IGNORED, reason="written by the evaluator itself"
            )
        parsed = paths.parse_index_file_name(key)
        if parsed is not None:
            problem = canonical_index_problem(key, *parsed)
            if problem is not None:
                log.warning("ignoring a non-canonical index key: %s", problem, extra={"key": key})
                return ObjectResult(key, ObjectKind.INDEX, ObjectAction.INVALID, reason=f"{key}: {problem}")
            return self.handle_index(trial_path_of(bucket, key, 3), parsed[0], parsed[1], key, remaining_s)
        if paths.parse_collections_file_name(key) is not None:
            return self.handle_collections(trial_path_of(bucket, key, 3), key)
        log.info("ignoring object that is not a Tornasole file", extra={"key": key})
        return ObjectResult(
            key,
            ObjectKind.IGNORED,
            ObjectAction.IGNORED,
            reason="not an index, collections, end marker or job file",
        )

    # -- registration by file -------------------------------------------------------------------
    def register_from_file(self, trial_path: str, key: str) -> ObjectResult:
        from tornasole.evaluator.job_limits import MAX_JOB_FILE_BYTES
        from tornasole.evaluator.registry import JobRegistry
        from tornasole.storage import get_storage

        path = f"{trial_path}/{JOB_CONFIG_FILE}"
        registry = JobRegistry(
            self.table,
            allowed_rule_prefixes=self.allowed_rule_prefixes,
            clock=self.clock,
            check_buckets=False,
        )
        try:  # read at most one byte past the limit: the registry refuses what is larger
            data = get_storage(path).read(path, 0, MAX_JOB_FILE_BYTES + 1)
        except (FileNotFoundError, PermissionError) as exc:
            outcome, job, reason = "invalid", None, f"{path}: cannot register the job: {exc}"
        else:
            outcome, job, reason = registry.register_file(trial_path, key, data)
        if outcome == "invalid" or job is None:
            log.warning(reason, extra={"key": key})
            self.steps.set_trial_error(trial_path, key, reason, self.now_ms())
            return ObjectResult(key, ObjectKind.JOB_CONFIG, ObjectAction.INVALID, job=job, reason=reason)
        replayed = self.adopt_orphans(job, trial_path, evaluate=True)
        if get_storage(trial_path).exists(
            f"{trial_path}/{END_MARKER_FILE}"
        ):  # training ended before registration
            self.handle_end_marker(trial_path, key)
        return ObjectResult(
            key,
            ObjectKind.JOB_CONFIG,
            ObjectAction(outcome),
            job=job,
            reason=f"{replayed} earlier index files replayed",
        )

    def adopt_orphans(self, job: str, trial_path: str, evaluate: bool, remaining_s: Remaining = None) -> int:
        """Index files that arrived before the job was registered become the job's steps (each on its own:
        one that fails stays pending for the scheduled check, the others are still adopted)."""
        orphans = self.steps.take_orphans(trial_path)
        for step, worker in orphans:
            if evaluate:
                try:
                    self.process_step(job, step, worker, remaining_s=remaining_s)
                except Exception:  # noqa: BLE001 - recorded pending; the schedule retries it
                    log.exception("adopted step failed; left pending", extra={"job": job, "step": step})
                    self.steps.record_worker(job, step, worker, self.clock())
                    self.steps.mark_pending(job, step, self.now_ms())
            else:
                self.steps.record_worker(job, step, worker, self.clock())
                self.steps.mark_pending(job, step, self.now_ms())
        return len(orphans)

    # -- steps ------------------------------------------------------------------------------
    def handle_index(
        self, trial_path: str, step: int, worker: str, key: str, remaining_s: Remaining = None
    ) -> ObjectResult:
        job = self.job_for_trial(trial_path)
        if job is None:
            self.steps.record_orphan(trial_path, step, worker, self.clock())
            # Registration claims the trial, then takes the orphans; we wrote the orphan, now re-read the
            # claim (both consistent): whichever of the two ran second sees the other, so none is left behind.
            job = self.table.job_for_trial(trial_path)
            if job is None:
                log.warning(
                    "index file for a trial no job is registered for; kept until one is",
                    extra={"key": key, "trial": trial_path, "step": step},
                )
                return ObjectResult(
                    key,
                    ObjectKind.INDEX,
                    ObjectAction.ORPHAN,
                    step=step,
                    reason=f"no job registered for {trial_path}",
                )
            self.adopt_orphans(job, trial_path, evaluate=True, remaining_s=remaining_s)
            return ObjectResult(
                key, ObjectKind.INDEX, ObjectAction.ADOPTED, job=job, step=step, reason="registered meanwhile"
            )
        return self.process_step(job, step, worker, key, remaining_s=remaining_s)

    def process_step(
        self,
        job: str,
        step: int,
        worker: str | None = None,
        key: str = "",
        remaining_s: Remaining = None,
        redrive: bool = False,
    ) -> ObjectResult:
        """Record the worker's arrival; evaluate the step once every worker's index file is there.

        Failed attempts are counted on the step (one that raised; a ``redrive`` by the scheduled check
        replaces one that died); after ``MAX_STEP_ATTEMPTS`` the step is recorded as an error for every
        rule, and the rules go on with later steps.
        """
        state = self.table.load_job(job)
        if state is None or state.status in TERMINAL_JOB:
            why = "unknown job" if state is None else f"job is {state.status.value}"
            return ObjectResult(key, ObjectKind.INDEX, ObjectAction.IGNORED, job=job, step=step, reason=why)
        rec = (
            self.steps.record_worker(job, step, worker, self.clock())
            if worker
            else self.steps.step(job, step)
        )
        if rec is None:
            return ObjectResult(
                key, ObjectKind.INDEX, ObjectAction.IGNORED, job=job, step=step, reason="step not recorded"
            )
        num_workers = state.num_workers or self.discover_num_workers(state)
        if num_workers is None:
            self.steps.mark_pending(job, step, self.now_ms())
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
        if rec.evaluated:
            return ObjectResult(
                key,
                ObjectKind.INDEX,
                ObjectAction.DUPLICATE,
                job=job,
                step=step,
                reason="step already evaluated",
            )
        attempts = self.steps.begin_attempt(job, step, self.now_ms(), redrive)
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

    def record_step_error(self, state: JobState, step: int, why: str) -> tuple[StepOutcome, ...]:
        """Record ``why`` against ``step`` for every evaluating rule and count the step as settled."""
        outcomes = tuple(
            StepOutcome(r.config.name, step, step_error=why)
            for r in state.rules
            if r.status in EVALUATING and r.config.rule_to_invoke != decisions.STALLED_RULE
        )
        now = self.now_ms()
        self.steps.record_evaluations(state.name, [(o, []) for o in outcomes], now)
        marked = self.steps.mark_evaluated_before_end(state.name, step, now)  # True: cannot complete the job
        if marked is None:
            self.steps.mark_evaluated(state.name, step, now)
        if marked is not True:
            self.complete(state.name)
        return outcomes

    def complete(self, job: str) -> list:
        """Apply ``decisions.completion`` with each still-InProgress rule's count of evaluated steps
        (queried only once the job is otherwise ready to complete)."""
        counts: dict[str, int] = {}

        def decide(state: JobState):
            if not decisions.ready_to_complete(state):
                return None
            for r in state.rules:
                if r.config.name not in counts:
                    counts[r.config.name] = self.steps.count_evaluated(job, r.config.name)
            return decisions.completion(state, counts)

        return self.transitions.apply(job, decide, self.now_ms())

    def evaluate_step(
        self, state: JobState, rec: StepRecord, num_workers: int, remaining_s: Remaining = None
    ) -> list[StepOutcome]:
        step = rec.step
        configs = [
            r.config
            for r in state.rules
            if r.status in EVALUATING
            and r.config.active_at(step)
            and r.config.rule_to_invoke != decisions.STALLED_RULE
        ]
        # a custom rule whose source is outside the allowed prefixes is never loaded (also checked here, not
        # only at registration: a job registered through the API must not bypass it)
        refused = {c.name: rule_source_problem(c, self.allowed_rule_prefixes) for c in configs}
        outcomes = [StepOutcome(name, step, error=why) for name, why in refused.items() if why]
        configs = [c for c in configs if not refused[c.name]]
        if configs:

            def history(depth: int, lead: int) -> list[tuple[int, tuple[str, ...]]]:
                recent = self.steps.previous_steps(state.name, step, depth)
                seen = {p.step for p in recent}
                first = [p for p in self.steps.first_steps(state.name, step, lead) if p.step not in seen]
                complete = [p for p in recent + first if len(p.workers) >= num_workers]
                return [(p.step, tuple(sorted(p.workers))) for p in complete]

            files = StepFiles(step, tuple(sorted(rec.workers)))
            outcomes += self.runner.run(state.name, state.trial_path, files, configs, history, remaining_s)
        now = self.now_ms()
        batch = [
            (o, decisions.issue_extras(state, o, sorted(rec.workers)) if o.fired and not o.error else [])
            for o in outcomes
        ]
        # No issue (so no outbox item, no refine) and no transition (apply's first look): one transaction.
        quiet = not any(o.fired and not o.error for o in outcomes)
        if (
            quiet
            and decisions.after_outcomes(outcomes)(state) is None
            and self.steps.record_and_mark_before_end(state.name, outcomes, step, now)
        ):
            return outcomes  # recorded and counted; the job cannot complete before its end marker
        self.steps.record_evaluations(state.name, batch, now)
        self.transitions.apply(state.name, decisions.after_outcomes(outcomes), now, state=state)
        for o in outcomes:
            if o.fired and not o.error:
                self.steps.refine_issue(state.name, o.rule_name, step, o.details)
        marked = self.steps.mark_evaluated_before_end(state.name, step, now)  # True: cannot complete the job
        if marked is None:
            self.steps.mark_evaluated(state.name, step, now)
        if marked is not True:
            self.complete(state.name)
        return outcomes

    def discover_num_workers(self, state: JobState) -> int | None:
        """Read ``num_workers`` from the first collections file (a listing bounded by the workers)."""
        from tornasole.format.collections import decode_collections
        from tornasole.storage import get_storage, join

        prefix = join(state.trial_path, paths.COLLECTIONS_DIR) + "/"
        storage = get_storage(state.trial_path)
        for path in storage.list(prefix):
            if paths.parse_collections_file_name(path) is None:
                continue
            _, n = decode_collections(read_capped(path), path)
            self.steps.set_num_workers(state.name, int(n))
            return int(n)
        return None

    def handle_collections(self, trial_path: str, key: str) -> ObjectResult:
        job = self.job_for_trial(trial_path)
        state = self.table.load_job(job) if job else None
        if state is None:
            return ObjectResult(
                key,
                ObjectKind.COLLECTIONS,
                ObjectAction.IGNORED,
                reason=f"no job registered for {trial_path}",
            )
        try:
            n = state.num_workers or self.discover_num_workers(state)
        except (ValueError, OSError) as exc:
            raise_if_transient(exc)
            reason = f"{key}: unreadable collections file: {exc}"
            self.steps.set_job_error(state.name, reason)
            return ObjectResult(key, ObjectKind.COLLECTIONS, ObjectAction.INVALID, job=job, reason=reason)
        done = []
        for _, step, _ in self.steps.pending(state.name):
            try:  # each pending step on its own: one failing step must not keep the others waiting
                done.append(self.process_step(state.name, step).action)
            except Exception as exc:  # noqa: BLE001 - it stays pending (attempt counted) for the schedule
                log.warning("pending step %d failed: %s", step, exc, extra={"job": state.name})
                done.append("failed")
        return ObjectResult(
            key,
            ObjectKind.COLLECTIONS,
            ObjectAction.NUM_WORKERS,
            job=job,
            reason=f"num_workers={n}; re-drove {done}",
        )

    # -- end of training --------------------------------------------------------------------------
    def handle_end_marker(self, trial_path: str, key: str) -> ObjectResult:
        return completion.handle_end_marker(self, trial_path, key)

    # -- schedule ---------------------------------------------------------------------------------
    def scheduled_check(self, remaining_s: Remaining = None) -> CheckReport:
        """Unpublished outbox items, stalled rules, completion, pending steps left by crashed invocations."""
        return run_scheduled_check(self, remaining_s)

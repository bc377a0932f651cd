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
from typing import TYPE_CHECKING, Any

from tornasole.evaluator import arrivals, completion, step_evaluation
from tornasole.evaluator.models import (
    JobState,
    ObjectAction,
    ObjectKind,
    ObjectResult,
    StepOutcome,
)
from tornasole.evaluator.objects import canonical_index_problem, trial_path_of
from tornasole.evaluator.runner import StepRunner
from tornasole.evaluator.schedule import CheckReport, run_scheduled_check
from tornasole.evaluator.store.outbox import OutboxPublisher
from tornasole.evaluator.store.state_table import StateTable
from tornasole.evaluator.store.step_store import StepRecord, StepStore
from tornasole.evaluator.store.transitions import Transitions
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
        """The evaluator a function runs; custom rules go to the rule sandbox when one is configured."""
        table = StateTable(env.state_table)
        custom = None
        if env.custom_rule_function and env.custom_rule_reader_role:
            from tornasole.evaluator.sandbox.rule_runners import LambdaCustomRuleRunner

            custom = LambdaCustomRuleRunner(env.custom_rule_function, env.custom_rule_reader_role)
        return cls(
            table,
            OutboxPublisher.from_env(env),
            runner=StepRunner(custom_rules=custom),
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
    def handle_object_created(
        self, bucket: str, key: str, remaining_s: Remaining = None, written_s: float | None = None
    ) -> ObjectResult:
        """Dispatch one object; ``remaining_s()``: the invocation's remaining seconds (rule deadlines);
        ``written_s``: when S3 says the object was written (tells a rewrite from a re-delivery)."""
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
            return self.handle_index(
                trial_path_of(bucket, key, 3), parsed[0], parsed[1], key, remaining_s, written_s
            )
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
        """See ``arrivals.register_from_file``."""
        return arrivals.register_from_file(self, trial_path, key)

    def adopt_orphans(self, job: str, trial_path: str, evaluate: bool, remaining_s: Remaining = None) -> int:
        """See ``arrivals.adopt_orphans``."""
        return arrivals.adopt_orphans(self, job, trial_path, evaluate, remaining_s)

    # -- steps ------------------------------------------------------------------------------
    def handle_index(
        self,
        trial_path: str,
        step: int,
        worker: str,
        key: str,
        remaining_s: Remaining = None,
        written_s: float | None = None,
    ) -> ObjectResult:
        """See ``arrivals.handle_index``."""
        return arrivals.handle_index(self, trial_path, step, worker, key, remaining_s, written_s)

    def process_step(
        self,
        job: str,
        step: int,
        worker: str | None = None,
        key: str = "",
        remaining_s: Remaining = None,
        redrive: bool = False,
    ) -> ObjectResult:
        """See ``step_evaluation.process_step``."""
        return step_evaluation.process_step(self, job, step, worker, key, remaining_s, redrive)

    def record_step_error(self, state: JobState, step: int, why: str) -> tuple[StepOutcome, ...]:
        """See ``step_evaluation.record_step_error``."""
        return step_evaluation.record_step_error(self, state, step, why)

    def complete(self, job: str) -> list:
        """See ``step_evaluation.complete``."""
        return step_evaluation.complete(self, job)

    def evaluate_step(
        self, state: JobState, rec: StepRecord, num_workers: int, remaining_s: Remaining = None
    ) -> list[StepOutcome]:
        """See ``step_evaluation.evaluate_step``."""
        return step_evaluation.evaluate_step(self, state, rec, num_workers, remaining_s)

    def discover_num_workers(self, state: JobState) -> int | None:
        """See ``arrivals.discover_num_workers``."""
        return arrivals.discover_num_workers(self, state)

    def handle_collections(self, trial_path: str, key: str) -> ObjectResult:
        """See ``arrivals.handle_collections``."""
        return arrivals.handle_collections(self, trial_path, key)

    # -- end of training --------------------------------------------------------------------------
    def handle_end_marker(self, trial_path: str, key: str) -> ObjectResult:
        return completion.handle_end_marker(self, trial_path, key)

    def training_state_change(self, event: Any) -> dict[str, Any]:
        """SageMaker's own training-job state change; invalid shapes answer ``action: invalid``."""
        from tornasole.evaluator.lifecycle import InvalidLifecycleEvent, training_state_change

        try:
            return training_state_change(self, event)
        except InvalidLifecycleEvent as exc:
            log.warning("not a SageMaker training job state change: %s", exc)
            return {"action": "invalid", "reason": str(exc)}

    # -- schedule ---------------------------------------------------------------------------------
    def scheduled_check(self, remaining_s: Remaining = None) -> CheckReport:
        """Unpublished outbox items, stalled rules, completion, pending steps left by crashed invocations."""
        return run_scheduled_check(self, remaining_s)

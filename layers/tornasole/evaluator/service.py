"""The evaluator's entry points: one S3 object in, state and outbox items out.

``handle_object_created(bucket, key)`` dispatches on the key's shape (S3
filters only allow a prefix and a suffix): an index file is a (step, worker)
arrival, a collections file gives ``num_workers``, the end marker starts
completion, ``tornasole_job.json`` registers the job. Everything is idempotent
(see ``store``: ``state_table`` / ``step_store`` / ``transitions``), so duplicated, reordered,
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

from tornasole.evaluator.arrivals import Arrivals
from tornasole.evaluator.completion import EndOfTraining
from tornasole.evaluator.lifecycle import InvalidLifecycleEvent
from tornasole.evaluator.models import ObjectAction, ObjectKind, ObjectResult
from tornasole.evaluator.objects import canonical_index_problem, trial_path_of
from tornasole.evaluator.profiler_files import ProfilerFiles
from tornasole.evaluator.runner import StepRunner
from tornasole.evaluator.schedule import CheckReport, ScheduledCheck
from tornasole.evaluator.step_evaluation import ReportWriter, StepEvaluation
from tornasole.evaluator.store.outbox import OutboxPublisher
from tornasole.evaluator.store.state_table import StateTable
from tornasole.evaluator.store.step_store import StepStore
from tornasole.evaluator.store.transitions import Transitions
from tornasole.evaluator.store.trial_owners import TrialOwners
from tornasole.format import paths
from tornasole.format.capture_request import is_capture_request_key
from tornasole.profiler.format.paths import profiler_file_kind
from tornasole.stack_spec import END_MARKER_FILE, JOB_CONFIG_FILE, STOP_SIGNAL_FILE

Remaining = Callable[[], float] | None  # seconds left in the invocation (None: no deadline known)

if TYPE_CHECKING:
    from tornasole.evaluator.handler_env import HandlerEnv

__all__ = ["Evaluator", "CheckReport", "trial_path_of"]

log = logging.getLogger(__name__)


class Evaluator:
    """Stateless service over the state table; build once per process (``from_env``).

    It wires the pipeline's parts to the collaborators they use (``arrivals``, ``step_evaluation``,
    ``completion``, ``schedule``) and dispatches each object to one of them. The parts read the time
    through ``now_s``, so a ``clock`` replaced on a warm evaluator applies to them too."""

    def __init__(
        self,
        table: StateTable,
        publisher: OutboxPublisher | None = None,
        runner: StepRunner | None = None,
        clock: Callable[[], float] = time.time,
        allowed_rule_prefixes: tuple[str, ...] | None = None,
        trial_prefix: str = "",
        trial_bucket: str | None = None,
        report_writer: ReportWriter | None = None,
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
        self.trials = TrialOwners(table)
        self.evaluation = StepEvaluation(
            table,
            self.steps,
            self.transitions,
            self.runner,
            self.now_s,
            allowed_rule_prefixes,
            report_writer=report_writer,
        )
        self.end_of_training = EndOfTraining(table, self.steps, self.evaluation, self.trials, self.now_s)
        self.arrivals = Arrivals(
            table,
            self.steps,
            self.evaluation,
            self.end_of_training,
            self.trials,
            self.now_s,
            allowed_rule_prefixes,
        )
        self.profiler_files = ProfilerFiles(table, self.transitions, self.trials, self.now_s)
        self.schedule = ScheduledCheck(
            table,
            self.steps,
            self.transitions,
            self.publisher,
            self.evaluation,
            self.end_of_training,
            self.now_s,
        )

    @classmethod
    def from_env(cls, env: HandlerEnv) -> Evaluator:
        """The evaluator a function runs; custom rules go to the rule sandbox when one is configured."""
        table = StateTable(env.state_table)
        custom = None
        if env.custom_rule_function and env.custom_rule_reader_role:
            from tornasole.evaluator.sandbox.rule_runners import LambdaCustomRuleRunner

            custom = LambdaCustomRuleRunner(env.custom_rule_function, env.custom_rule_reader_role)
        from tornasole.reports import JobReportWriter  # the report at the end of a job (docs/REPORTS.md)

        return cls(
            table,
            OutboxPublisher.from_env(env),
            runner=StepRunner(custom_rules=custom),
            allowed_rule_prefixes=env.allowed_rule_prefixes,
            trial_prefix=env.trial_prefix,
            trial_bucket=env.trial_bucket,
            report_writer=JobReportWriter(),
        )

    def now_s(self) -> float:
        return self.clock()

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

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
            return self.arrivals.register_from_file(trial_path_of(bucket, key, 1), key)
        if name == END_MARKER_FILE:
            return self.end_of_training.handle_end_marker(trial_path_of(bucket, key, 1), key)
        if name == STOP_SIGNAL_FILE or is_capture_request_key(key):
            return ObjectResult(
                key, ObjectKind.STOP_SIGNAL, ObjectAction.IGNORED, reason="written by the evaluator itself"
            )
        parsed = paths.parse_index_file_name(key)
        if parsed is not None:
            problem = canonical_index_problem(key, *parsed)
            if problem is not None:
                log.warning("ignoring a non-canonical index key: %s", problem, extra={"key": key})
                return ObjectResult(key, ObjectKind.INDEX, ObjectAction.INVALID, reason=f"{key}: {problem}")
            return self.arrivals.handle_index(
                trial_path_of(bucket, key, 3), parsed[0], parsed[1], key, remaining_s, written_s
            )
        if paths.parse_collections_file_name(key) is not None:
            return self.arrivals.handle_collections(trial_path_of(bucket, key, 3), key)
        if profiler_file_kind(key) is not None:
            if any(part in ("", ".", "..") for part in key.split("/")):
                reason = f"{key}: a profiler key with '.', '..' or empty path segments"
                return ObjectResult(key, ObjectKind.PROFILER, ObjectAction.INVALID, reason=reason)
            return self.profiler_files.handle(bucket, key)
        log.info("ignoring object that is not a Tornasole file", extra={"key": key})
        return ObjectResult(
            key,
            ObjectKind.IGNORED,
            ObjectAction.IGNORED,
            reason="not an index, collections, end marker or job file",
        )

    # -- end of training ---------------------------------------------------------------------------
    def training_state_change(self, event: Any) -> dict[str, Any]:
        """SageMaker's own training-job state change; invalid shapes answer ``action: invalid``."""
        try:
            return self.end_of_training.training_state_change(event)
        except InvalidLifecycleEvent as exc:
            log.warning("not a SageMaker training job state change: %s", exc)
            return {"action": "invalid", "reason": str(exc)}

    # -- schedule ---------------------------------------------------------------------------------
    def scheduled_check(self, remaining_s: Remaining = None) -> CheckReport:
        """Unpublished outbox items, stalled rules, completion, pending steps left by crashed invocations."""
        return self.schedule.run(remaining_s)

"""What the evaluator does when a job file, an index file or a collections file arrives.

Split from ``service`` (which dispatches on the key) so each module stays one concern: here a job
file registers its job and replays the index files that came before it (orphans), an index file is
a (step, worker) arrival handed to ``step_evaluation``, and a collections file gives ``num_workers``
and re-drives the steps that were waiting for it. ``Arrivals`` holds the collaborators it uses: the
state table, the step store, the step evaluation, the end of training and the trials' owners.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tornasole.evaluator.completion import EndOfTraining
from tornasole.evaluator.failures import UnusableCollections, raise_if_transient
from tornasole.evaluator.lifecycle import note_rewrite, written_after_end
from tornasole.evaluator.models import ObjectAction, ObjectKind, ObjectResult
from tornasole.evaluator.step_evaluation import REWRITTEN, StepEvaluation
from tornasole.evaluator.store.state_table import StateTable
from tornasole.evaluator.store.step_store import StepStore
from tornasole.evaluator.store.trial_owners import TrialOwners
from tornasole.stack_spec import END_MARKER_FILE, JOB_CONFIG_FILE

__all__ = ["Arrivals"]

log = logging.getLogger(__name__)

Remaining = Callable[[], float] | None


class Arrivals:
    """Job files, index files and collections files of the trials of one state table."""

    def __init__(
        self,
        table: StateTable,
        steps: StepStore,
        evaluation: StepEvaluation,
        end_of_training: EndOfTraining,
        trials: TrialOwners,
        clock: Callable[[], float],
        allowed_rule_prefixes: tuple[str, ...] | None = None,
    ) -> None:
        self.table = table
        self.steps = steps
        self.evaluation = evaluation
        self.end_of_training = end_of_training
        self.trials = trials
        self.clock = clock
        self.allowed_rule_prefixes = allowed_rule_prefixes

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def register_from_file(self, trial_path: str, key: str) -> ObjectResult:
        from tornasole.evaluator.registration.job_limits import MAX_JOB_FILE_BYTES
        from tornasole.evaluator.registration.job_registry import JobRegistry
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
            self.end_of_training.handle_end_marker(trial_path, key)
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
                    self.evaluation.process_step(job, step, worker, remaining_s=remaining_s)
                except Exception:  # noqa: BLE001 - recorded pending; the schedule retries it
                    log.exception("adopted step failed; left pending", extra={"job": job, "step": step})
                    self.steps.record_worker(job, step, worker, self.clock())
                    self.steps.mark_pending(job, step, self.now_ms())
            else:
                self.steps.record_worker(job, step, worker, self.clock())
                self.steps.mark_pending(job, step, self.now_ms())
        return len(orphans)

    def handle_index(
        self,
        trial_path: str,
        step: int,
        worker: str,
        key: str,
        remaining_s: Remaining = None,
        written_s: float | None = None,
    ) -> ObjectResult:
        job = self.trials.job_for_trial(trial_path)
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
        written_ms = round(written_s * 1000) if written_s is not None else None
        result = self.evaluation.process_step(
            job, step, worker, key, remaining_s=remaining_s, written_ms=written_ms
        )
        if result.action == ObjectAction.IGNORED and result.reason.startswith("job is "):
            self.note_if_rewritten(job, key, step, written_s)
        elif result.action == ObjectAction.EVALUATED and result.reason == REWRITTEN:
            state = self.table.load_job(job)  # a step evaluated again: the rewrite recorded as after the end
            if state is not None:
                note_rewrite(self.table, state, key, step, self.now_ms())
        return result

    def note_if_rewritten(self, job: str, key: str, step: int | None, written_s: float | None) -> None:
        """An index file for an ended job, written after it ended: its trial is written again
        (``lifecycle.note_rewrite``); a re-delivered notification of an earlier write is not."""
        state = self.table.load_job(job)
        if state is not None and written_after_end(state, written_s):
            note_rewrite(self.table, state, key, step, self.now_ms())

    def handle_collections(self, trial_path: str, key: str) -> ObjectResult:
        job = self.trials.job_for_trial(trial_path)
        state = self.table.load_job(job) if job else None
        if state is None:
            return ObjectResult(
                key,
                ObjectKind.COLLECTIONS,
                ObjectAction.IGNORED,
                reason=f"no job registered for {trial_path}",
            )
        try:
            n = state.num_workers or self.evaluation.num_workers(state)
        except (ValueError, OSError) as exc:
            raise_if_transient(exc)
            reason = (
                str(exc)
                if isinstance(exc, UnusableCollections)
                else f"{key}: unreadable collections file: {exc}"
            )
            if not isinstance(exc, UnusableCollections):
                self.steps.set_job_error(state.name, reason)
            for _, step, _ in self.steps.pending(state.name):  # waiting for this file: settled, never stuck
                self.evaluation.record_step_error(
                    self.table.load_job(state.name) or state, step, f"step {step}: {reason}"
                )
            return ObjectResult(key, ObjectKind.COLLECTIONS, ObjectAction.INVALID, job=job, reason=reason)
        done = []
        for _, step, _ in self.steps.pending(state.name):
            try:  # each pending step on its own: one failing step must not keep the others waiting
                done.append(self.evaluation.process_step(state.name, step).action)
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

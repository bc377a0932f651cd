"""End of training: when a job may complete, and what happens to steps that never became complete.

Why this is careful: every worker writes the same end marker
(``training_job_end.ts``), so its notifications cannot say which worker is
done, and the first one may arrive while other workers are still writing.
Completing on the first marker with the steps complete at that moment loses
the rest ("ignored: job is Completed").

* Each end-marker notification lists the run's index files once and raises
  ``expected_steps`` to the number of distinct steps *any* worker wrote (never
  lowers it: notifications race). The last worker's marker comes after its
  last index file, so its listing includes every step.
* The job completes only when every expected step is settled: evaluated, or
  recorded as an error for the step (``StepEvaluation.record_step_error``).
* A step that some worker never writes (a collections file claiming two
  workers when one writes, a worker that died) would keep the job open forever,
  so the scheduled check settles ended jobs that have been quiet for
  ``END_GRACE_S`` (at least twice the function timeout, so no evaluation of
  theirs is still running): complete steps never evaluated (a lost
  notification) are evaluated now, incomplete ones are recorded as incomplete
  for every rule, and the job completes once its pending steps (re-driven by
  the check, with their attempt counts) are settled too. Rules that evaluated nothing because
  every step was incomplete or unreadable to them then go to ``Error`` (``decisions``), never
  ``NoIssuesFound``.
* SageMaker's own end (``training_state_change``, see ``lifecycle``) is an end marker for the job of
  that name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tornasole.evaluator.failures import UnusableCollections
from tornasole.evaluator.lifecycle import MAX_REASON, SAGEMAKER_END_STATUSES, sagemaker_detail
from tornasole.evaluator.models import TERMINAL_JOB, JobStatus, ObjectAction, ObjectKind, ObjectResult
from tornasole.evaluator.objects import listed_steps
from tornasole.evaluator.step_evaluation import StepEvaluation
from tornasole.evaluator.store.keys import META, STEP_PREFIX, job_pk
from tornasole.evaluator.store.state_table import StateTable
from tornasole.evaluator.store.step_store import StepStore
from tornasole.evaluator.store.trial_owners import TrialOwners
from tornasole.stack_spec import DEFAULT_SPEC

__all__ = ["END_GRACE_S", "EndOfTraining"]

log = logging.getLogger(__name__)

END_GRACE_S = max(600, 2 * DEFAULT_SPEC.on_object_created.timeout_s)


class EndOfTraining:
    """Ends of training (end markers, SageMaker's end events) and the settling of ended jobs' steps."""

    def __init__(
        self,
        table: StateTable,
        steps: StepStore,
        evaluation: StepEvaluation,
        trials: TrialOwners,
        clock: Callable[[], float],
    ) -> None:
        self.table = table
        self.steps = steps
        self.evaluation = evaluation
        self.trials = trials
        self.clock = clock

    def handle_end_marker(self, trial_path: str, key: str) -> ObjectResult:
        job = self.trials.job_for_trial(trial_path)
        state = self.table.load_job(job) if job else None
        if state is None:
            return ObjectResult(
                key, ObjectKind.END_MARKER, ObjectAction.IGNORED, reason=f"no job registered for {trial_path}"
            )
        if state.status in TERMINAL_JOB:
            # Another worker's marker (every worker writes the same key, the last ones after the job
            # completed), or a re-run's: either way the end noted for the job stays the one its verdict was
            # given at, so a re-run's index files are still told from the run's (lifecycle.written_after_end).
            return ObjectResult(
                key,
                ObjectKind.END_MARKER,
                ObjectAction.END_SEEN,
                job=job,
                reason=f"job is {state.status.value}",
            )
        steps = listed_steps(state)
        self.steps.set_end_marker(state.name, len(steps), self.clock())
        changes = self.evaluation.complete(state.name)
        return ObjectResult(
            key,
            ObjectKind.END_MARKER,
            ObjectAction.COMPLETED if changes else "end_seen",
            job=job,
            reason=f"{len(steps)} steps written",
        )

    def settle(self, job: str, now_s: float) -> int:
        """Settle an ended, quiet job's unsettled steps (see the module docstring); returns how many."""
        state = self.table.load_job(job)
        if state is None or state.status in TERMINAL_JOB or not state.end_marker_seen:
            return 0
        if now_s - max(state.end_marker_s, state.last_activity_s) < END_GRACE_S:
            return 0
        steps = listed_steps(state)
        try:
            discovered = state.num_workers or self.evaluation.num_workers(state)
        except UnusableCollections:  # the job's rules say why; each step below is settled as an error
            discovered = None
        num_workers = discovered or max(map(len, steps.values()), default=1)
        self.steps.raise_expected_steps(job, len(steps))
        # evaluated steps are done; pending ones are the pending re-drive's (attempts counted there)
        gsi_pk = self.table.spec.gsi.partition_key
        recorded = self.table.query(job_pk(job), STEP_PREFIX)
        busy = {int(i["step"]) for i in recorded if "step" in i and ("evaluated" in i or gsi_pk in i)}
        settled = 0
        for step, workers in sorted(steps.items()):
            if step in busy:
                continue
            for w in sorted(workers):  # a step whose notifications were lost is recorded first
                self.steps.record_worker(job, step, w, state.last_activity_s)
            if len(workers) >= num_workers:
                self.evaluation.process_step(job, step)
            else:
                why = (
                    f"step {step} is incomplete: {len(workers)} of {num_workers} workers wrote it "
                    f"({', '.join(sorted(workers))}) by the end of training"
                )
                fresh = self.table.load_job(job) or state
                self.evaluation.record_step_error(fresh, step, why)
            settled += 1
        self.evaluation.complete(job)
        return settled

    def training_state_change(self, event: Any) -> dict[str, Any]:
        """SageMaker's "SageMaker Training Job State Change" event: a terminal status ends the job of that
        name (see ``lifecycle``). Returns what it did; another shape is ``InvalidLifecycleEvent``."""
        detail = sagemaker_detail(event)
        name, status = str(detail["TrainingJobName"]), str(detail["TrainingJobStatus"])
        out: dict[str, Any] = {"job": name, "training_status": status}
        if status not in SAGEMAKER_END_STATUSES:
            return {**out, "action": "ignored", "reason": f"{status} is not the end of training"}
        state = self.table.load_job(name)
        if state is None:
            return {**out, "action": "ignored", "reason": f"no job named {name!r} is registered"}
        if state.status in TERMINAL_JOB:
            return {**out, "action": "ignored", "reason": f"job is already {state.status.value}"}
        reason = detail.get("FailureReason")
        sets = "SET training_end_status = if_not_exists(training_end_status, :s)"
        values: dict[str, Any] = {":s": status}
        if status == JobStatus.FAILED.value:
            sets += ", training_end_reason = if_not_exists(training_end_reason, :r)"
            values[":r"] = (str(reason) if reason else "SageMaker reported the training job Failed")[
                :MAX_REASON
            ]
        self.table.update(job_pk(name), META, sets, values, condition="job_exists")
        fresh = self.table.load_job(name) or state
        listed = len(listed_steps(fresh))
        self.steps.set_end_marker(name, listed, self.clock())
        changes = self.evaluation.complete(name)
        return {
            **out,
            "action": "completed" if changes else "end_seen",
            "reason": f"SageMaker: training {status}; {listed} steps written",
        }

"""The periodic check: what no S3 notification will ever trigger.

* ``StalledTrainingRule``: no new step for its ``threshold`` seconds (nothing
  arrives to notice the silence, so only a clock can);
* completion of jobs whose last transition was lost to a crash;
* steps left on the sparse PENDING index by an invocation that died after
  recording the worker and before marking the step evaluated (older than a
  grace period, so steps being evaluated right now are left alone);
* outbox items the stream never published (``OutboxPublisher.redrive``);
* ended jobs whose last steps never became complete (``completion.settle``);
* jobs with no new data for their idle timeout and no end of training (``lifecycle.idle_timeout``).

Order and isolation: unpublished events are re-sent *first* (a poison step must
never keep other jobs' events from going out), and every event, job and step is
handled on its own: one failure is logged and counted in ``errors``, the rest go
on. A step is re-driven only once it has been pending longer than the function
timeout (an invocation still evaluating it would otherwise race us), and each
re-drive counts as a failed attempt (``MAX_STEP_ATTEMPTS``), so a poison step is
recorded as an error for that step after a few checks instead of failing them all.

Everything it reads comes from the sparse GSI (active jobs, pending steps,
unpublished items): its cost follows what needs attention, not the table size.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tornasole.evaluator import decisions, lifecycle
from tornasole.evaluator.completion import EndOfTraining
from tornasole.evaluator.step_evaluation import StepEvaluation
from tornasole.evaluator.store.keys import ACTIVE
from tornasole.evaluator.store.outbox import OutboxPublisher
from tornasole.evaluator.store.state_table import StateTable
from tornasole.evaluator.store.step_store import StepStore
from tornasole.evaluator.store.transitions import JOB, Transitions
from tornasole.stack_spec import DEFAULT_SPEC

__all__ = ["CheckReport", "PENDING_GRACE_MS", "ScheduledCheck"]

log = logging.getLogger(__name__)

# Longer than an evaluation can run (the function timeout), so a step still being evaluated is left alone.
PENDING_GRACE_MS = (DEFAULT_SPEC.on_object_created.timeout_s + 60) * 1000
# Seconds of the check's own invocation kept in reserve: past that, the rest waits for the next check.
RESERVE_S = 30.0


@dataclass
class CheckReport:
    """What one scheduled check did."""

    jobs: int = 0
    stalled: int = 0
    completed: int = 0
    redriven: int = 0
    steps_redriven: int = 0
    steps_settled: int = 0
    idle_ended: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class ScheduledCheck:
    """The periodic check over one state table (see the module docstring)."""

    def __init__(
        self,
        table: StateTable,
        steps: StepStore,
        transitions: Transitions,
        publisher: OutboxPublisher,
        evaluation: StepEvaluation,
        end_of_training: EndOfTraining,
        clock: Callable[[], float],
    ) -> None:
        self.table = table
        self.steps = steps
        self.transitions = transitions
        self.publisher = publisher
        self.evaluation = evaluation
        self.end_of_training = end_of_training
        self.clock = clock

    def run(self, remaining_s: Callable[[], float] | None = None) -> CheckReport:
        """One check; ``remaining_s()``: the invocation's seconds left (past ``RESERVE_S`` the rest waits)."""
        report = CheckReport()
        now_s, now_ms = self.clock(), int(self.clock() * 1000)

        def time_left() -> bool:
            return remaining_s is None or remaining_s() > RESERVE_S

        def guarded(what: str, fn: Callable[[], Any]) -> Any:
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - one broken job, step or event must not stop the others
                log.exception("scheduled check: %s failed", what)
                report.errors.append(f"{what}: {type(exc).__name__}: {exc}"[:500])
                return None

        stalled = decisions.stalled(now_s)
        idle = lifecycle.idle_timeout(now_s)
        report.redriven = guarded("outbox re-drive", lambda: self.publisher.redrive(now_ms)) or 0
        for item in guarded("active jobs", lambda: self.table.query(ACTIVE, "", index=True)) or []:
            job = item[self.table.spec.gsi.sort_key]
            report.jobs += 1
            if not time_left():
                break
            report.stalled += len(
                guarded(f"job {job}", lambda j=job: self.transitions.apply(j, stalled, now_ms)) or []
            )
            report.completed += bool(guarded(f"job {job}", lambda j=job: self.evaluation.complete(j)))
            report.steps_settled += (
                guarded(f"job {job}", lambda j=job: self.end_of_training.settle(j, now_s)) or 0
            )
            ended = guarded(f"job {job}", lambda j=job: self.transitions.apply(j, idle, now_ms)) or []
            report.idle_ended += any(c.entity == JOB for c in ended)
        process = self.evaluation.process_step
        for job, step, since in guarded("pending steps", self.steps.pending) or []:
            if since > now_ms - PENDING_GRACE_MS or not time_left():
                continue
            report.steps_redriven += 1
            guarded(
                f"step {step} of {job}",
                lambda j=job, s=step: process(j, s, remaining_s=remaining_s, redrive=True),
            )
        return report

"""The periodic check: what no S3 notification will ever trigger.

* ``StalledTrainingRule``: no new step for its ``threshold`` seconds (nothing
  arrives to notice the silence, so only a clock can);
* completion of jobs whose last transition was lost to a crash;
* steps left on the sparse PENDING index by an invocation that died after
  recording the worker and before marking the step evaluated (older than a
  grace period, so steps being evaluated right now are left alone);
* outbox items the stream never published (``OutboxPublisher.redrive``).

Everything it reads comes from the sparse GSI (active jobs, pending steps,
unpublished items): its cost follows what needs attention, not the table size.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tornasole.evaluator import decisions

if TYPE_CHECKING:
    from tornasole.evaluator.service import Evaluator

__all__ = ["CheckReport", "PENDING_GRACE_MS", "run_scheduled_check"]

log = logging.getLogger(__name__)

PENDING_GRACE_MS = 60_000


@dataclass
class CheckReport:
    """What one scheduled check did."""

    jobs: int = 0
    stalled: int = 0
    completed: int = 0
    redriven: int = 0
    steps_redriven: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def run_scheduled_check(ev: Evaluator) -> CheckReport:
    report = CheckReport()
    now_s, now_ms = ev.clock(), ev.now_ms()
    for item in ev.table.query("ACTIVE", "", index=True):
        job = item["gsi1sk"]
        report.jobs += 1
        try:
            report.stalled += len(ev.transitions.apply(job, decisions.stalled(now_s), now_ms))
            report.completed += bool(ev.transitions.apply(job, decisions.completion, now_ms))
        except Exception as exc:  # one broken job must not stop the check of the others
            log.exception("scheduled check failed for a job", extra={"job": job})
            report.errors.append(f"{job}: {exc!r}")
    for job, step, since in ev.steps.pending():
        if since <= now_ms - PENDING_GRACE_MS:
            report.steps_redriven += 1
            ev.process_step(job, step)
    report.redriven = ev.publisher.redrive(now_ms)
    return report

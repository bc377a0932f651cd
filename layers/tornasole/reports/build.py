"""Assemble a report: a job's verdicts or a trial evaluated locally, its tensors, its profiler files.

Two callers: ``tornasole report`` (a registered job, or a trial path for which the recommended set is
evaluated here) and the evaluator at the end of a job (:class:`JobReportWriter`, injected into its
completion as a collaborator, so the evaluator depends on a callable, not on this package's choices).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tornasole.reports.debugger_data import DebuggerData, load_debugger_data
from tornasole.reports.page import render_page
from tornasole.reports.profiler_data import load_profiler_data
from tornasole.reports.verdicts import JobInfo, Verdict, evaluate_recommended, from_job_detail
from tornasole.stack_spec import REPORT_FILE  # not a .json key: no S3 notification routes it back

__all__ = [
    "REPORT_FILE",
    "JobReportWriter",
    "job_report_html",
    "report_location",
    "trial_report_html",
]

log = logging.getLogger(__name__)

#: How long a report waits for a trial's collections file (a job that never wrote has none).
_COLLECTIONS_WAIT_S = 0.0


def report_location(trial_path: str) -> str:
    """Where the stack writes a job's report: ``<trial>/tornasole-report.html``."""
    from tornasole.storage import join

    return join(trial_path, REPORT_FILE)


def _open_trial(trial_path: str) -> Any:
    from tornasole.trials import create_trial

    return create_trial(trial_path, collections_timeout=_COLLECTIONS_WAIT_S)


def _debugger(trial: Any | None, notes: list[str]) -> DebuggerData | None:
    if trial is None:
        return None
    try:
        return load_debugger_data(trial)
    except Exception as exc:  # noqa: BLE001 - the report says what it could not read and goes on
        log.warning("report: the trial's tensors could not be read", exc_info=True)
        notes.append(f"The trial's tensors could not be read: {type(exc).__name__}: {exc}")
        return None


def _profiler(trial_path: str, notes: list[str]):
    try:
        return load_profiler_data(trial_path)
    except Exception as exc:  # noqa: BLE001 - as above
        log.warning("report: the profiler files could not be read", exc_info=True)
        notes.append(f"The profiler files could not be read: {type(exc).__name__}: {exc}")
        return None


def job_report_html(
    detail: Mapping[str, Any],
    fired: Mapping[str, Sequence[int]],
    *,
    open_trial: Callable[[str], Any] = _open_trial,
    now_s: float | None = None,
) -> str:
    """The report of a registered job: its ``describe`` detail (epoch-ms times, as the events carry
    them) and, per rule, the steps where it fired."""
    info, verdicts = from_job_detail(detail, fired)
    notes: list[str] = []
    trial = None
    if info.trial_path:
        try:
            trial = open_trial(info.trial_path)
        except Exception as exc:  # noqa: BLE001 - a job that wrote nothing still gets its verdicts
            notes.append(f"The trial could not be opened: {type(exc).__name__}: {exc}")
    debugger = _debugger(trial, notes)
    profiler = _profiler(info.trial_path, notes) if info.trial_path else None
    info = dataclasses.replace(info, notes=tuple(notes))
    return render_page(info, verdicts, debugger, profiler, generated_s=now_s)


def trial_report_html(
    trial_path: str,
    *,
    configs: Sequence[Mapping[str, Any]] | None = None,
    open_trial: Callable[[str], Any] = _open_trial,
    now_s: float | None = None,
) -> str:
    """The report of a trial with no registered job: the recommended set (or ``configs``) evaluated
    here, over every saved step. A trial that cannot be opened raises (the command names the path)."""
    trial = open_trial(trial_path)
    verdicts: list[Verdict] = evaluate_recommended(trial, configs)
    notes: list[str] = ["Verdicts: the recommended rules, evaluated locally over the saved steps."]
    debugger = _debugger(trial, notes)
    profiler = _profiler(trial_path, notes)
    ended = debugger is not None and debugger.training_ended
    info = JobInfo(
        name=None,
        status="Completed" if ended else "InProgress",
        trial_path=trial_path,
        source="trial",
        notes=tuple(notes),
    )
    return render_page(info, verdicts, debugger, profiler, generated_s=now_s)


class JobReportWriter:
    """Renders a finished job's report and writes it into its trial; returns where, or None on failure.

    The evaluator calls it with the job's final detail just before the job's terminal transition, so
    the completion event can carry the location. It never raises: a report that cannot be rendered or
    written is logged and the job completes without one (the event then says null).
    """

    def __init__(
        self,
        render: Callable[..., str] = job_report_html,
        write: Callable[[str, bytes], None] | None = None,
    ) -> None:
        self.render = render
        self.write = write or _write

    def __call__(self, detail: Mapping[str, Any], fired: Mapping[str, Sequence[int]]) -> str | None:
        hook = detail.get("DebugHookConfig") or {}
        trial_path = str(hook.get("S3OutputPath") or "")
        job = detail.get("TrainingJobName")
        if not trial_path:
            log.warning("no report for job %s: it has no trial path", job)
            return None
        started = time.monotonic()
        try:
            html = self.render(detail, fired)
            where = report_location(trial_path)
            self.write(where, html.encode("utf-8"))
        except Exception:  # noqa: BLE001 - never fails the job's completion
            log.exception("the report of job %s could not be rendered or written", job)
            return None
        log.info(
            "report written",
            extra={
                "job": job,
                "report": where,
                "bytes": len(html),
                "seconds": round(time.monotonic() - started, 3),
            },
        )
        return where


def _write(path: str, data: bytes) -> None:
    from tornasole.storage import get_storage

    get_storage(path).write_atomic(path, data)

"""One registered job as ``tornasole jobs status`` shows it: the jobs API of ``--table``, its state.

Shared by ``jobs status``, ``jobs register`` (the status after registering) and ``--watch``; kept apart
from the sub-commands so none of them imports another to print a job.
"""

from __future__ import annotations

import argparse
from typing import Any

from tornasole.cli.table import cell_width, format_table

__all__ = ["jobs_of", "print_status", "state_of", "status_rows"]


def jobs_of(args: argparse.Namespace) -> Any:
    from tornasole.jobs import TornasoleJobs

    return TornasoleJobs(getattr(args, "table", None))


def state_of(jobs: Any, name: str) -> Any:
    from tornasole.jobs import JobNotFoundError

    state = jobs.table.load_job(name)
    if state is None:
        raise JobNotFoundError(f"no training job named {name!r} is registered in table {jobs.table.name}")
    return state


def status_rows(jobs: Any, name: str) -> tuple[str, list[list[Any]]]:
    """The job's status and one row per rule: name, verdict, first issue step, details. The verdict is the
    RuleEvaluationStatus, except ``NothingEvaluated`` for a rule that read nothing (stored as NoIssuesFound
    with ``NothingEvaluated:`` details; :mod:`tornasole.rules.verdict`)."""
    from tornasole.rules.verdict import verdict_of_status

    state = state_of(jobs, name)
    rows = [
        [r.config.name, verdict_of_status(r.status.value, r.details), r.issue_step, r.details or ""]
        for r in state.rules
    ]
    return state.status.value, rows


def print_status(jobs: Any, name: str) -> str:
    from tornasole.rules.outcome import split_advice

    status, rows = status_rows(jobs, name)
    print(f"job {name}: {status}")
    print(format_table(["rule", "status", "first issue step", "details"], rows, max_width=cell_width(90)))
    rewritten = jobs.describe(name).get("TornasoleTrialRewritten")
    if rewritten:  # the verdict above describes data that was overwritten since (evaluator.lifecycle)
        print(f"warning: {rewritten['StatusDetails']}")
    advice = [(rule, split_advice(details)[1]) for rule, _, _, details in rows]
    if any(text for _, text in advice):  # the table cuts long details: each firing's advice in full
        print("\nwhat to do:")
        for rule, text in advice:
            if text:
                print(f"  {rule}: {text}")
    return status

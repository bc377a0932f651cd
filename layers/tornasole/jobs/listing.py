"""List registered jobs (``tornasole jobs list``) from the ``JOBS`` registry partition.

Why a registry partition: listing must not scan the table (its size grows
with every step of every run); the registry holds one item per job, written
in the registration transaction, so a listing costs one paginated Query plus
one Query per job for its statuses.
"""

from __future__ import annotations

from typing import Any

from tornasole.evaluator.models import RuleStatus
from tornasole.evaluator.state import StateTable

__all__ = ["fired_steps", "list_jobs"]


def list_jobs(table: StateTable | None = None) -> list[dict[str, Any]]:
    """One row per job: ``name``, ``status``, ``rules`` (count), ``issues`` (IssuesFound), ``trial_path``.

    Examples
    --------
    >>> list_jobs()  # doctest: +SKIP
    [{'name': 'my-job', 'status': 'InProgress', 'rules': 2, 'issues': 1, 'trial_path': 's3://b/run'}]
    """
    table = table or StateTable()
    rows = []
    for item in table.query("JOBS", ""):
        state = table.load_job(item["sk"])
        if state is None:
            continue
        rows.append(
            {
                "name": state.name,
                "status": state.status.value,
                "rules": len(state.rules),
                "issues": sum(r.status == RuleStatus.ISSUES_FOUND for r in state.rules),
                "trial_path": state.trial_path,
            }
        )
    return rows


def fired_steps(job: str, table_name: str | None = None) -> dict[str, list[int]]:
    """Rule name -> sorted global steps where that rule of ``job`` fired (rules that never fired left out).

    Used to mark firing steps on a plot (``tornasole plot --job``, the demo).

    Raises
    ------
    JobNotFoundError
        No job of that name is registered.
    """
    from tornasole.jobs.api import TornasoleJobs

    jobs = TornasoleJobs(table_name)
    out: dict[str, list[int]] = {}
    for summary in jobs.rule_job_summary(job):
        rule = summary["RuleConfigurationName"]
        steps = [int(rec["step"]) for rec in jobs.rule_evaluations(job, rule) if rec.get("fired")]
        if steps:
            out[rule] = sorted(steps)
    return out

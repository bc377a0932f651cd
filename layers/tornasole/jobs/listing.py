"""List registered jobs (``tornasole jobs list``) from the registry partition.

Why a registry partition: listing must not scan the table (its size grows
with every step of every run); the registry holds one item per job, written
in the registration transaction, and one per failed registration, so a
listing costs one paginated Query plus one Query per job for its statuses.
The work is ``tornasole.evaluator.registration.job_registry.JobRegistry.list_jobs``.
"""

from __future__ import annotations

from typing import Any

from tornasole.evaluator.registration.job_registry import JobRegistry
from tornasole.evaluator.store.state_table import StateTable

__all__ = ["fired_steps", "list_jobs"]


def list_jobs(table: StateTable | None = None) -> list[dict[str, Any]]:
    """One row per job: ``name``, ``status``, ``rules`` (count), ``issues`` (IssuesFound), ``trial_path``;
    a failed registration is ``Failed`` with its ``failure_reason`` (``name`` None when the file had none).

    Examples
    --------
    >>> list_jobs()  # doctest: +SKIP
    [{'name': 'my-job', 'status': 'InProgress', 'rules': 2, 'issues': 1, 'trial_path': 's3://b/run'}]
    """
    return JobRegistry(table or StateTable(), check_buckets=False).list_jobs()


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

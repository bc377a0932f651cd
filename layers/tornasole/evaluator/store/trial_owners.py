"""Which job owns a trial, remembered by a warm process.

A trial is claimed by one job for good (``trial_unclaimed_or_ours``), so a warm process asks the
table once per trial instead of once per step. "No job yet" is never remembered: a registration
may claim the trial at any time.
"""

from __future__ import annotations

from tornasole.evaluator.store.state_table import StateTable

__all__ = ["MAX_REMEMBERED_TRIALS", "TrialOwners"]

MAX_REMEMBERED_TRIALS = 10_000


class TrialOwners:
    """The job owning each trial path, read from ``table`` and kept (at most ``limit`` trials)."""

    def __init__(self, table: StateTable, limit: int = MAX_REMEMBERED_TRIALS) -> None:
        self.table = table
        self.limit = limit
        self._jobs: dict[str, str] = {}

    def job_for_trial(self, trial_path: str) -> str | None:
        job = self._jobs.get(trial_path)
        if job is None:
            job = self.table.job_for_trial(trial_path)
            if job is not None and len(self._jobs) < self.limit:
                self._jobs[trial_path] = job
        return job

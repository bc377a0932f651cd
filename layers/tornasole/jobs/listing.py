"""List the registered jobs: an operator's view for the CLI, not a hot path.

The evaluator never needs "all jobs" (every access it makes is keyed by job
or by the sparse GSI), so the table has no index for it; the listing is a
paginated Scan projected to the job ``#META`` items. Its cost grows with the
table, which is fine for a person typing ``tornasole jobs list``.
"""

from __future__ import annotations

from typing import Any

from tornasole.evaluator.state import StateTable

__all__ = ["list_jobs"]


def list_jobs(table: StateTable) -> list[dict[str, Any]]:
    """Every job's name, status, trial path and times, sorted by creation time."""
    pk, sk = table.spec.partition_key, table.spec.sort_key
    kwargs: dict[str, Any] = {
        "TableName": table.name,
        "FilterExpression": "#sk = :meta AND begins_with(#pk, :job)",
        "ExpressionAttributeNames": {"#pk": pk, "#sk": sk},
        "ExpressionAttributeValues": {":meta": {"S": "#META"}, ":job": {"S": "JOB#"}},
    }
    jobs: list[dict[str, Any]] = []
    while True:
        resp = table.client.scan(**kwargs)
        jobs.extend(table.from_attrs(item) for item in resp.get("Items", []))
        if "LastEvaluatedKey" not in resp:
            break
        kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
    names = sorted(jobs, key=lambda j: (j.get("creation_ms") or 0, j[pk]))
    out = []
    for j in names:
        state = table.load_job(j[pk][len("JOB#") :])
        if state is not None:
            out.append(
                {
                    "name": state.name,
                    "status": state.status.value,
                    "trial_path": state.trial_path,
                    "rules": len(state.rules),
                    "issues": sum(1 for r in state.rules if r.status.value == "IssuesFound"),
                    "creation_ms": state.creation_ms,
                }
            )
    return out

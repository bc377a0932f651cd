"""One rule's evaluation log for one job, from CloudWatch Logs (the original docs' rule-job logs).

The evaluator's functions log JSON lines (Powertools) carrying ``job``,
``rule`` and ``step`` keys; a CloudWatch Logs JSON filter pattern selects one
rule of one job. Locally (moto, which does not evaluate JSON patterns) the same
selection is applied to the returned lines, so both give the same answer. The
per-step verdicts themselves are in DynamoDB (``TornasoleJobs.rule_evaluations``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

__all__ = ["filter_pattern", "rule_log"]


def filter_pattern(job: str, rule: str | None = None) -> str:
    """The CloudWatch Logs filter pattern for a job's (and optionally one rule's) log lines.

    Examples
    --------
    >>> filter_pattern("my-job", "VanishingGradient")
    '{ ($.job = "my-job") && ($.rule = "VanishingGradient") }'
    """
    terms = [f'($.job = "{job}")'] + ([f'($.rule = "{rule}")'] if rule else [])
    return "{ " + " && ".join(terms) + " }"


def rule_log(job: str, rule: str | None, log_group: str, client: Any = None) -> Iterator[dict[str, Any]]:
    """The JSON log lines of ``rule`` evaluating ``job`` in ``log_group`` (oldest first, paginated).

    ``log_group`` is the evaluator function's group (``/aws/lambda/<OnObjectCreated function name>``).
    """
    if client is None:
        from tornasole.aws.clients import client as make_client

        client = make_client("logs")
    kwargs: dict[str, Any] = {"logGroupName": log_group, "filterPattern": filter_pattern(job, rule)}
    while True:
        resp = client.filter_log_events(**kwargs)
        for event in resp.get("events", []):
            try:
                line = json.loads(event["message"])
            except ValueError:
                continue
            if line.get("job") == job and (rule is None or line.get("rule") == rule):
                yield line
        token = resp.get("nextToken")
        if not token:
            return
        kwargs["nextToken"] = token

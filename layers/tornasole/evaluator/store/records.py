"""Typed values <-> stored items: the conversions the DynamoDB access layer delegates.

Why here and not in ``state``: ``state`` is the table access (requests,
conditions, sizes); which attribute of which item becomes which field of a
``JobState`` is a fact about the values, kept next to them, so the writer
knows nothing about rules, statuses or jobs.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from tornasole.evaluator.models import JobState, JobStatus, RuleConfig, RuleState, RuleStatus
from tornasole.evaluator.store.keys import META, RULE_PREFIX

__all__ = ["from_dynamo", "job_state", "to_dynamo"]


def to_dynamo(value: Any) -> Any:
    """DynamoDB numbers are Decimals: convert floats (times, hook parameters) on the way in."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: to_dynamo(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_dynamo(v) for v in value]
    return value


def from_dynamo(value: Any) -> Any:
    """Decimals back to int (integral) or float, so callers and JSON see plain numbers."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: from_dynamo(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_dynamo(v) for v in value]
    return value


def job_state(job: str, items: list[dict[str, Any]], sort_key: str) -> JobState | None:
    """The ``JobState`` of a job's ``#META`` and ``#RULE#`` items (None without a meta item)."""
    meta = next((i for i in items if i[sort_key] == META), None)
    if meta is None:
        return None
    rules = tuple(
        RuleState(
            config=RuleConfig.from_json(i["config"]),
            status=RuleStatus(i["status"]),
            details=i.get("details", ""),
            last_modified_ms=int(i.get("last_modified", 0)),
            issue_step=int(i["issue_step"]) if "issue_step" in i else None,
        )
        for i in sorted(
            (i for i in items if i[sort_key].startswith(RULE_PREFIX)), key=lambda i: int(i.get("order", 0))
        )
    )
    return JobState(
        name=job,
        arn=meta["arn"],
        trial_path=meta["trial_path"],
        status=JobStatus(meta["status"]),
        seq=int(meta["seq"]),
        rules_rev=int(meta.get("rules_rev", 1)),
        rules=rules,
        hook_config=meta.get("hook_config"),
        num_workers=int(meta["num_workers"]) if "num_workers" in meta else None,
        creation_ms=int(meta.get("creation_time", 0)),
        start_ms=int(meta.get("start_time", 0)),
        end_ms=int(meta["end_time"]) if "end_time" in meta else None,
        last_modified_ms=int(meta.get("last_modified", 0)),
        failure_reason=meta.get("failure_reason"),
        job_error=meta.get("job_error"),
        end_marker_seen=bool(meta.get("end_marker_seen", False)),
        expected_steps=int(meta["expected_steps"]) if "expected_steps" in meta else None,
        steps_evaluated=int(meta.get("steps_evaluated", 0)),
        last_activity_s=float(meta.get("last_activity", 0)),
        end_marker_s=float(meta.get("end_marker_at", 0)),
        describe_fields=meta.get("describe_fields"),
        idle_timeout_s=float(meta["idle_timeout_s"]) if "idle_timeout_s" in meta else None,
        training_end_status=meta.get("training_end_status"),
        training_end_reason=meta.get("training_end_reason"),
        rewritten_at_ms=int(meta["rewritten_at"]) if "rewritten_at" in meta else None,
        last_rewrite_ms=int(meta["last_rewrite_at"]) if "last_rewrite_at" in meta else None,
        rewrite_key=meta.get("rewrite_key"),
        rewrites=int(meta.get("rewrites", 0)),
        report_location=meta.get("report_location"),
    )

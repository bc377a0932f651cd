"""Register jobs on the serverless evaluator and read them back, SageMaker-style.

A thin, user-facing front: everything is done by
``tornasole.evaluator.registration.job_registry.JobRegistry`` (the one place registration
lives, shared with the ``tornasole_job.json`` handler). This module adds what a
Python user expects: the table from ``TORNASOLE_STATE_TABLE``, the caller's
account in ARNs, and ``describe()`` times as ``datetime`` objects, as boto3
returns them.

Registration is validated before anything is written (rule names with a "did
you mean", parameters against each rule's declared ones, every limit, the
bucket's existence) and raises ``InvalidJobConfiguration`` listing every
problem. Re-registering the same job with the same rules is a no-op; different
rules raise ``JobConflictError``: changing rules is the explicit
``update_job_rules``.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from tornasole.evaluator.models import JobSpec
from tornasole.evaluator.registration.job_limits import JOB_NAME_PATTERN
from tornasole.evaluator.registration.job_registry import JobNotFoundError, JobRegistry
from tornasole.evaluator.registration.job_request import spec_from_arguments
from tornasole.evaluator.registration.registrar import JobConflictError
from tornasole.evaluator.store.state_table import StateTable
from tornasole.evaluator.store.step_store import StepStore

__all__ = [
    "TornasoleJobs",
    "JobNotFoundError",
    "JobConflictError",
    "JOB_NAME",
    "default_rules",
    "with_datetimes",
]

logger = logging.getLogger(__name__)

JOB_NAME = JOB_NAME_PATTERN  # SageMaker's training job name pattern
_TIME_KEYS = ("CreationTime", "TrainingStartTime", "TrainingEndTime", "LastModifiedTime")


@functools.cache
def _account() -> str:
    """The caller's account for ARNs (one STS call per process; a placeholder when STS is unreachable)."""
    try:
        from tornasole.aws.clients import client

        return client("sts").get_caller_identity()["Account"]
    except Exception:  # noqa: BLE001 - an ARN decoration must never block registration
        return "000000000000"


def _datetime(value: Any) -> Any:
    if isinstance(value, str) and value.isdigit():
        return datetime.fromtimestamp(int(value) / 1000, tz=UTC)
    return value


def default_rules(rules: Any) -> Any:
    """``rules``, or the recommended set (``tornasole.rules.recommended_rules()``) when none are given.

    ``None`` means "I did not choose": the calibrated set, logged by name so the choice is visible.
    An explicit empty list stays an error (a job needs at least one rule).
    """
    if rules is not None:
        return rules
    from tornasole.rules import recommended_rules

    chosen = recommended_rules()
    logger.info(
        "no rules given: registering the recommended set: %s",
        ", ".join(r["RuleConfigurationName"] for r in chosen),
    )
    return chosen


def with_datetimes(detail: Mapping[str, Any]) -> dict[str, Any]:
    """A describe dict with its epoch-millisecond times as timezone-aware ``datetime`` (as boto3)."""
    out = dict(detail)
    for key in _TIME_KEYS:
        if key in out:
            out[key] = _datetime(out[key])
    for field in ("DebugRuleEvaluationStatuses", "ProfilerRuleEvaluationStatuses"):
        if field in out or field == "DebugRuleEvaluationStatuses":
            out[field] = [
                {**s, "LastModifiedTime": _datetime(s.get("LastModifiedTime"))} for s in out.get(field, [])
            ]
    return out


class TornasoleJobs:
    """Jobs API over the state table.

    Examples
    --------
    >>> from tornasole.jobs import Rule, TornasoleJobs
    >>> from tornasole.rules import rule_configs
    >>> jobs = TornasoleJobs()                                               # doctest: +SKIP
    >>> jobs.register_job("my-job", "s3://bucket/run",                       # doctest: +SKIP
    ...                   [Rule.sagemaker(rule_configs.vanishing_gradient())])
    >>> jobs.rule_job_summary("my-job")[0]["RuleEvaluationStatus"]           # doctest: +SKIP
    'InProgress'
    """

    def __init__(
        self,
        table_name: str | None = None,
        client: Any = None,
        *,
        table: StateTable | None = None,
        allowed_rule_prefixes: tuple[str, ...] | None = None,
        clock: Callable[[], float] = time.time,
        check_buckets: bool = True,
    ) -> None:
        self.table = table or StateTable(
            table_name or os.environ.get("TORNASOLE_STATE_TABLE") or None, client
        )
        self.registry = JobRegistry(
            self.table,
            account=_account,
            region=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
            allowed_rule_prefixes=allowed_rule_prefixes,
            clock=clock,
            check_buckets=check_buckets,
        )

    def arn(self, name: str) -> str:
        return self.registry.arn(name)

    # -- registration ------------------------------------------------------------------------
    def build_spec(
        self,
        name: str,
        s3_output_path: str,
        rules: Any,
        hook_config: Mapping[str, Any] | None = None,
        num_workers: int | None = None,
    ) -> JobSpec:
        """The validated ``JobSpec`` a registration would write (raises ``InvalidJobConfiguration``)."""
        return spec_from_arguments(name, s3_output_path, rules, hook_config, num_workers)

    def register_job(
        self,
        name: str,
        s3_output_path: str,
        rules: Any = None,
        hook_config: Mapping[str, Any] | None = None,
        num_workers: int | None = None,
        idle_timeout_s: float | None = None,
        profiler_rules: Any = None,
    ) -> dict[str, Any]:
        """Register a job (idempotent for identical settings); returns ``describe(name)``.

        Without ``rules`` (and without ``profiler_rules``) the job gets the recommended set
        (:func:`default_rules`). ``profiler_rules``: ``ProfilerRuleConfigurations`` entries (as
        ``ProfilerRule.sagemaker(...)`` sends them), evaluated per profiler file. ``idle_timeout_s``:
        seconds without new data after which the job ends as Failed (``IdleTimeout``; default six hours).
        """
        if rules is None and profiler_rules:
            rules = []
        rules = default_rules(rules)
        self.registry.register_arguments(
            name, s3_output_path, rules, hook_config, num_workers, idle_timeout_s, profiler_rules
        )
        return self.describe(name)

    def register_from_request(
        self, request: Mapping[str, Any], idle_timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Register a saved SageMaker ``CreateTrainingJob`` request (as the ``sagemaker`` SDK sends it).

        The trial is ``<DebugHookConfig.S3OutputPath>/<TrainingJobName>/debug-output``, SageMaker's
        convention; returns ``describe(TrainingJobName)``.
        """
        spec = self.registry.register_request(request, idle_timeout_s)
        return self.describe(spec.name)

    def register_from_config(self, config: Any, trial_path: str) -> tuple[str, str]:
        """Register a parsed ``tornasole_job.json`` found at ``trial_path``; ``(outcome, job name)``."""
        from tornasole.evaluator.registration.job_request import spec_from_config

        spec = spec_from_config(config, trial_path)
        return self.registry.register(spec, adopt_orphans=False), spec.name

    def update_job_rules(
        self, name: str, rules: Any, s3_output_path: str | None = None, profiler_rules: Any = None
    ) -> dict[str, Any]:
        """Replace a job's rules (the explicit change): unchanged rules keep their status, others restart.

        ``rules`` replaces the debug (tensor) rules, ``profiler_rules`` the profiler rules; a set left
        ``None`` is kept as registered (docs/PROFILER_RULES.md). With ``s3_output_path`` different from the
        registered one, the job moves to that trial path.
        """
        self.registry.update(name, rules, s3_output_path, profiler_rules)
        return self.describe(name)

    # -- reading back -----------------------------------------------------------------------------
    def describe(self, name: str, *, datetimes: bool = True) -> dict[str, Any]:
        """The DescribeTrainingJob-shaped dict; times are ``datetime`` (``datetimes=False``: the
        epoch-millisecond strings the events carry). A failed registration is ``Failed`` with its
        ``FailureReason``."""
        detail = self.registry.describe(name)
        from tornasole.rules.inputs import INPUT_WARNINGS_FIELD, input_warnings

        unreadable = input_warnings(detail)  # said before training: a rule its hook config starves
        if unreadable:
            detail[INPUT_WARNINGS_FIELD] = unreadable
        return with_datetimes(detail) if datetimes else detail

    def rule_job_summary(self, name: str) -> list[dict[str, Any]]:
        """``DebugRuleEvaluationStatuses`` then ``ProfilerRuleEvaluationStatuses`` of the job (as the
        SageMaker SDK's ``rule_job_summary()``)."""
        d = self.describe(name)
        return d["DebugRuleEvaluationStatuses"] + d.get("ProfilerRuleEvaluationStatuses", [])

    def list_jobs(self) -> list[dict[str, Any]]:
        """One row per job, failed registrations included (with ``failure_reason``)."""
        return self.registry.list_jobs()

    def rule_evaluations(self, name: str, rule: str) -> list[dict[str, Any]]:
        """One rule's per-step evaluation records (its report): step, fired, details, values, error."""
        self.registry.describe(name)
        return StepStore(self.table).evaluations(name, rule)

    def trial_error(self, trial_path: str) -> dict[str, Any] | None:
        """The last unusable ``tornasole_job.json`` under ``trial_path`` (key and reason), if any."""
        return StepStore(self.table).trial_error(trial_path)

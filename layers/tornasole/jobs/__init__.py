"""Jobs on the serverless evaluator: register, update, describe, summarise (SageMaker-shaped).

Floor plan: imported by cli, demo and users; imports the evaluator, rules, aws and below.

Mirrors the SageMaker Python SDK's debugger surface so estimator code ports by
changing the import root: ``Rule.sagemaker(rule_configs.vanishing_gradient())``,
``Rule.custom(...)``, ``CollectionConfig``; ``describe()`` returns the
DescribeTrainingJob-shaped dict of EVENTS.md and ``rule_job_summary()`` its
``DebugRuleEvaluationStatuses``.

Registration is validated before anything is written and raises
``tornasole.exceptions.InvalidJobConfiguration`` listing every problem (an
unknown rule or parameter comes with a "did you mean" and the valid ones).
``register_from_request`` takes a saved SageMaker ``CreateTrainingJob``
request as the ``sagemaker`` SDK sends it; its trial is SageMaker's
``<S3OutputPath>/<TrainingJobName>/debug-output``.

The event-driven alternative is a ``tornasole_job.json`` file uploaded at the
trial root (``tornasole.stack_spec.JOB_CONFIG_FILE``); one that cannot be
registered is recorded as a ``Failed`` job whose ``FailureReason`` says why
(``describe``, ``list_jobs``)::

    {"TrainingJobName": "my-job",
     "S3OutputPath": "s3://bucket/run",            # optional: the file's location, or its
                                                    #   <S3OutputPath>/<TrainingJobName>/debug-output
     "DebugHookConfig": {...},                      # optional
     "NumWorkers": 2,                               # optional: else read from the collections file
     "DebugRuleConfigurations": [...]}              # or the 2019 "rules_specification": [...]

Examples
--------
>>> from tornasole.jobs import Rule, register_job, describe      # doctest: +SKIP
>>> from tornasole.rules import rule_configs                     # doctest: +SKIP
>>> register_job("my-job", "s3://bucket/run",
...              [Rule.sagemaker(rule_configs.vanishing_gradient())])  # doctest: +SKIP
>>> describe("my-job")["TrainingJobStatus"]                      # doctest: +SKIP
'InProgress'
"""

from __future__ import annotations

from typing import Any

from tornasole.exceptions import InvalidJobConfiguration
from tornasole.jobs.api import JobConflictError, JobNotFoundError, TornasoleJobs
from tornasole.jobs.builders import CollectionConfig, Rule
from tornasole.jobs.listing import list_jobs
from tornasole.jobs.normalize import normalise_rules, validate_rule
from tornasole.jobs.text import format_event, format_job

__all__ = [
    "CollectionConfig",
    "InvalidJobConfiguration",
    "JobConflictError",
    "JobNotFoundError",
    "Rule",
    "TornasoleJobs",
    "describe",
    "format_event",
    "format_job",
    "list_jobs",
    "normalise_rules",
    "register_from_request",
    "register_job",
    "rule_job_summary",
    "update_job_rules",
    "validate_rule",
]


def register_job(
    name: str,
    s3_output_path: str,
    rules: Any = None,
    hook_config: dict | None = None,
    num_workers: int | None = None,
    table_name: str | None = None,
    idle_timeout_s: float | None = None,
    profiler_rules: Any = None,
) -> dict[str, Any]:
    """Register a job on the evaluator (table from ``TORNASOLE_STATE_TABLE`` unless given).

    Without ``rules`` (or ``profiler_rules``) the job gets ``tornasole.rules.recommended_rules()``, the
    calibrated set. ``profiler_rules``: ``ProfilerRuleConfigurations`` entries. ``idle_timeout_s``:
    seconds without new data after which the job ends (default six hours).
    """
    return TornasoleJobs(table_name).register_job(
        name, s3_output_path, rules, hook_config, num_workers, idle_timeout_s, profiler_rules
    )


def register_from_request(
    request: dict[str, Any], table_name: str | None = None, idle_timeout_s: float | None = None
) -> dict[str, Any]:
    """Register a saved SageMaker ``CreateTrainingJob`` request; returns ``describe(TrainingJobName)``."""
    return TornasoleJobs(table_name).register_from_request(request, idle_timeout_s)


def update_job_rules(
    name: str,
    rules: Any,
    table_name: str | None = None,
    s3_output_path: str | None = None,
    profiler_rules: Any = None,
) -> dict[str, Any]:
    """Replace a registered job's rules (the explicit change); move it when ``s3_output_path`` differs.

    ``rules`` replaces the debug rules and ``profiler_rules`` the profiler rules; a set left ``None``
    is kept as registered (``update_job_rules(name, [...])`` never drops the profiler rules).
    """
    return TornasoleJobs(table_name).update_job_rules(name, rules, s3_output_path, profiler_rules)


def describe(job_name: str, table_name: str | None = None) -> dict[str, Any]:
    """The DescribeTrainingJob-shaped dict of EVENTS.md, times as ``datetime`` (as boto3 returns them)."""
    return TornasoleJobs(table_name).describe(job_name)


def rule_job_summary(job_name: str, table_name: str | None = None) -> list[dict[str, Any]]:
    """``DebugRuleEvaluationStatuses`` of the job."""
    return TornasoleJobs(table_name).rule_job_summary(job_name)

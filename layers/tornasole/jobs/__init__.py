"""Jobs on the serverless evaluator: register, update, describe, summarise (SageMaker-shaped).

Mirrors the SageMaker Python SDK's debugger surface so estimator code ports by
changing the import root: ``Rule.sagemaker(rule_configs.vanishing_gradient())``,
``Rule.custom(...)``, ``CollectionConfig``; ``describe()`` returns the
DescribeTrainingJob-shaped dict of EVENTS.md and ``rule_job_summary()`` its
``DebugRuleEvaluationStatuses``.

The event-driven alternative is a ``tornasole_job.json`` file uploaded at the
trial root (``tornasole.stack_spec.JOB_CONFIG_FILE``)::

    {"TrainingJobName": "my-job",
     "S3OutputPath": "s3://bucket/run",            # optional: defaults to the file's location
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

from tornasole.jobs.api import JobConflictError, JobNotFoundError, TornasoleJobs
from tornasole.jobs.builders import CollectionConfig, Rule
from tornasole.jobs.listing import list_jobs
from tornasole.jobs.normalize import normalise_rules, validate_rule

__all__ = [
    "CollectionConfig",
    "JobConflictError",
    "JobNotFoundError",
    "Rule",
    "TornasoleJobs",
    "describe",
    "list_jobs",
    "normalise_rules",
    "register_job",
    "rule_job_summary",
    "update_job_rules",
    "validate_rule",
]


def register_job(
    name: str,
    s3_output_path: str,
    rules: Any,
    hook_config: dict | None = None,
    num_workers: int | None = None,
    table_name: str | None = None,
) -> dict[str, Any]:
    """Register a job on the evaluator (table from ``TORNASOLE_STATE_TABLE`` unless given)."""
    return TornasoleJobs(table_name).register_job(name, s3_output_path, rules, hook_config, num_workers)


def update_job_rules(name: str, rules: Any, table_name: str | None = None) -> dict[str, Any]:
    """Replace a registered job's rules (the explicit change)."""
    return TornasoleJobs(table_name).update_job_rules(name, rules)


def describe(job_name: str, table_name: str | None = None) -> dict[str, Any]:
    """The DescribeTrainingJob-shaped dict of EVENTS.md."""
    return TornasoleJobs(table_name).describe(job_name)


def rule_job_summary(job_name: str, table_name: str | None = None) -> list[dict[str, Any]]:
    """``DebugRuleEvaluationStatuses`` of the job."""
    return TornasoleJobs(table_name).rule_job_summary(job_name)

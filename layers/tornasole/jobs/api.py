"""Register jobs on the serverless evaluator and read them back, SageMaker-style.

Registration writes DynamoDB directly (one transaction: job, rules, trial
mapping, InProgress event), whether it comes from this API, the CLI or the
``tornasole_job.json`` file a training job uploads. Re-registering the same job
with the same rules is a no-op; different rules raise ``JobConflictError``:
changing rules is the explicit ``update_job_rules``. Reading back returns the
same DescribeTrainingJob-shaped dict the events carry (``details.describe``).
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from tornasole.evaluator.details import describe, rule_statuses
from tornasole.evaluator.models import JobSpec, job_arn
from tornasole.evaluator.registration import JobConflictError, Registrar
from tornasole.evaluator.state import StateTable
from tornasole.evaluator.steps import StepStore
from tornasole.evaluator.transitions import Transitions, to_error
from tornasole.exceptions import ConfigurationError, TornasoleValueError
from tornasole.jobs.normalize import normalise_rules, validate_rule

__all__ = ["TornasoleJobs", "JobNotFoundError", "JobConflictError", "JOB_NAME"]

JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")  # SageMaker's training job name pattern


class JobNotFoundError(TornasoleValueError, KeyError):
    """No job of that name is registered."""


@functools.cache
def _account() -> str:
    """The caller's account for ARNs (one STS call per process; a placeholder when STS is unreachable)."""
    try:
        from tornasole.aws.clients import client

        return client("sts").get_caller_identity()["Account"]
    except Exception:  # noqa: BLE001 - an ARN decoration must never block registration
        return "000000000000"


def _merge_hook_config(
    hook_config: Mapping[str, Any] | None, rules: Any, s3_output_path: str
) -> dict[str, Any]:
    hook = dict(hook_config or {})
    hook["S3OutputPath"] = s3_output_path
    colls = {c["CollectionName"]: c for c in hook.get("CollectionConfigurations", [])}
    for r in rules if isinstance(rules, (list, tuple)) else ():
        for c in getattr(r, "collections_to_save", ()) or ():
            colls.setdefault(c["CollectionName"], c)
    hook["CollectionConfigurations"] = list(colls.values())
    return hook


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
    ) -> None:
        self.table = table or StateTable(
            table_name or os.environ.get("TORNASOLE_STATE_TABLE") or None, client
        )
        self.allowed_rule_prefixes = allowed_rule_prefixes
        self.clock = clock

    def arn(self, name: str) -> str:
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        return job_arn(name, region, _account())

    # -- registration ------------------------------------------------------------------------
    def build_spec(
        self,
        name: str,
        s3_output_path: str,
        rules: Any,
        hook_config: Mapping[str, Any] | None = None,
        num_workers: int | None = None,
    ) -> JobSpec:
        if not JOB_NAME.match(name or ""):
            raise ConfigurationError(f"training job name {name!r} must match {JOB_NAME.pattern}")
        if not str(s3_output_path).startswith("s3://"):
            raise ConfigurationError(f"S3 output path {s3_output_path!r} must be an s3:// URI")
        path = str(s3_output_path).rstrip("/")
        return JobSpec(
            name=name,
            s3_output_path=path,
            rules=normalise_rules(rules),
            hook_config=_merge_hook_config(hook_config, rules, path),
            num_workers=int(num_workers) if num_workers else None,
        )

    def register_job(
        self,
        name: str,
        s3_output_path: str,
        rules: Any,
        hook_config: Mapping[str, Any] | None = None,
        num_workers: int | None = None,
    ) -> dict[str, Any]:
        """Register a job (idempotent for identical settings); returns ``describe(name)``."""
        spec = self.build_spec(name, s3_output_path, rules, hook_config, num_workers)
        self._register(spec)
        self._adopt_orphans(spec)
        return self.describe(name)

    def _register(self, spec: JobSpec) -> str:
        errors = {
            r.name: reason for r in spec.rules if (reason := validate_rule(r, self.allowed_rule_prefixes))
        }
        return Registrar(self.table).register(spec, self.arn(spec.name), int(self.clock() * 1000), errors)

    def _adopt_orphans(self, spec: JobSpec) -> None:
        """Steps seen before an API registration become pending; the scheduled check evaluates them."""
        steps = StepStore(self.table)
        for step, worker in steps.take_orphans(spec.trial_path):
            steps.record_worker(spec.name, step, worker, self.clock())
            steps.mark_pending(spec.name, step, 0)

    def register_from_config(self, config: Mapping[str, Any], trial_path: str) -> tuple[str, str]:
        """Register from a ``tornasole_job.json`` found at ``trial_path``; ``(outcome, job name)``."""
        if not isinstance(config, Mapping):
            raise ConfigurationError("the job configuration must be a JSON object")
        name = config.get("TrainingJobName") or config.get("training_job_name") or config.get("name")
        if not name:
            raise ConfigurationError("the job configuration has no TrainingJobName")
        path = str(config.get("S3OutputPath") or config.get("s3_output_path") or trial_path).rstrip("/")
        if path != trial_path.rstrip("/"):
            raise ConfigurationError(f"S3OutputPath {path} does not match the file's location {trial_path}")
        if "DebugRuleConfigurations" not in config and "rules_specification" not in config:
            raise ConfigurationError(
                "the job configuration has neither DebugRuleConfigurations nor rules_specification"
            )
        spec = self.build_spec(
            str(name),
            path,
            config,
            config.get("DebugHookConfig"),
            config.get("NumWorkers") or config.get("num_workers"),
        )
        return self._register(spec), spec.name

    def update_job_rules(self, name: str, rules: Any) -> dict[str, Any]:
        """Replace a job's rules (the explicit change): unchanged rules keep their status, others restart."""
        new = normalise_rules(rules)
        now_ms = int(self.clock() * 1000)
        Registrar(self.table).update_rules(name, new, now_ms)
        errors = {r.name: reason for r in new if (reason := validate_rule(r, self.allowed_rule_prefixes))}
        for rule_name, reason in errors.items():
            Transitions(self.table).apply(name, lambda s, n=rule_name, r=reason: to_error(s, n, r), now_ms)
        return self.describe(name)

    # -- reading back -----------------------------------------------------------------------------
    def _state(self, name: str):
        state = self.table.load_job(name)
        if state is None:
            raise JobNotFoundError(f"no training job named {name!r} is registered in table {self.table.name}")
        return state

    def describe(self, name: str) -> dict[str, Any]:
        """The DescribeTrainingJob-shaped dict of EVENTS.md."""
        return describe(self._state(name))

    def rule_job_summary(self, name: str) -> list[dict[str, Any]]:
        """``DebugRuleEvaluationStatuses`` of the job (as the SageMaker SDK's ``rule_job_summary()``)."""
        return rule_statuses(self._state(name))

    def rule_evaluations(self, name: str, rule: str) -> list[dict[str, Any]]:
        """One rule's per-step evaluation records (its report): step, fired, details, values, error."""
        self._state(name)
        return StepStore(self.table).evaluations(name, rule)

    def trial_error(self, trial_path: str) -> dict[str, Any] | None:
        """The last unusable ``tornasole_job.json`` under ``trial_path`` (key and reason), if any."""
        return StepStore(self.table).trial_error(trial_path)

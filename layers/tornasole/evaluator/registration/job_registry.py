"""The one place jobs are registered, updated, described and listed.

Every door goes through ``JobRegistry``: the Python API and the CLI
(``tornasole.jobs`` is a thin front over this class), a saved SageMaker
``CreateTrainingJob`` request, and the ``tornasole_job.json`` file the
evaluator's handler sees. Each builds a validated ``JobSpec``
(``job_request``), so nothing is written for a registration that cannot work;
the write itself is ``Registrar``'s one transaction.

A configuration FILE may not name custom rule code (``source_s3_uri``) unless
the deployment opts in (``rule_code_in_files``): whoever can write training
data could otherwise run code in the evaluator; custom rules are registered
through the API or CLI, by the registrant role.

A configuration FILE that cannot be registered is not an exception for the
handler to crash on (a crash would send the notification to the dead-letter
queue three times and leave no trace a user can see): it becomes a
failed-registration record, which ``describe`` and ``list_jobs`` return with
its ``FailureReason``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from tornasole.evaluator.details import describe, profiler_rule_statuses, rule_statuses
from tornasole.evaluator.models import JobSpec, RuleStatus, job_arn, rule_source_problem
from tornasole.evaluator.objects import end_marker_present, listed_steps
from tornasole.evaluator.registration import job_limits, job_request
from tornasole.evaluator.registration.job_config import normalise_profiler_rules, normalise_rules
from tornasole.evaluator.registration.registrar import JobConflictError, Registrar, unnamed_failure_key
from tornasole.evaluator.store.state_table import StateTable
from tornasole.evaluator.store.step_store import StepStore
from tornasole.evaluator.store.transitions import Transitions, to_error
from tornasole.exceptions import InvalidJobConfiguration, TornasoleValueError

__all__ = ["JobRegistry", "JobNotFoundError", "JobConflictError", "ensure_bucket_exists"]

log = logging.getLogger(__name__)


class JobNotFoundError(TornasoleValueError, KeyError):
    """No job of that name is registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def ensure_bucket_exists(s3_path: str) -> None:
    """``HeadBucket`` on the path's bucket: a missing bucket is an error at registration, not a silent wait.

    Access denied is not proof of absence (the evaluator may read what the registrant cannot): logged.
    """
    from botocore.exceptions import ClientError

    from tornasole.aws.clients import client

    bucket = s3_path.split("/")[2]
    try:
        client("s3").head_bucket(Bucket=bucket)
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchBucket", "NotFound"):
            raise InvalidJobConfiguration(f"bucket {bucket!r} of {s3_path} does not exist") from exc
        if code not in ("403", "AccessDenied", "Forbidden"):
            raise
        log.warning("cannot check bucket %s (access denied); registering anyway", bucket)


def parse_job_file(data: bytes) -> Any:
    """A ``tornasole_job.json``'s bytes -> JSON, bounded in size and depth (the caller names the file)."""
    if len(data) > job_limits.MAX_JOB_FILE_BYTES:
        raise InvalidJobConfiguration(f"the file is larger than {job_limits.MAX_JOB_FILE_BYTES} bytes")
    try:
        return json.loads(data)
    except RecursionError:
        raise InvalidJobConfiguration("the file's JSON is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidJobConfiguration(f"the file is not valid JSON: {exc}") from exc


#: The job file's key (and the request's extra field) for ``idle_timeout_s``.
IDLE_TIMEOUT_KEY = "IdleTimeoutSeconds"


def _with_idle_timeout(spec: JobSpec, value: Any, what: str = "idle_timeout_s") -> JobSpec:
    """``spec`` with its validated idle timeout (``job_limits.check_idle_timeout``; None: the default)."""
    try:
        seconds = job_limits.check_idle_timeout(value, what)
    except TornasoleValueError as exc:
        raise InvalidJobConfiguration(str(exc), job=spec.name) from None
    return spec if seconds is None else dataclasses.replace(spec, idle_timeout_s=seconds)


class JobRegistry:
    """Register, update, describe and list jobs over one state table."""

    def __init__(
        self,
        table: StateTable,
        *,
        account: Callable[[], str] = lambda: "000000000000",
        region: str = "us-east-1",
        allowed_rule_prefixes: tuple[str, ...] | None = None,
        clock: Callable[[], float] = time.time,
        check_buckets: bool = True,
        rule_code_in_files: bool = False,
    ) -> None:
        self.table = table
        self.account = account
        self.region = region
        self.allowed_rule_prefixes = allowed_rule_prefixes
        self.clock = clock
        self.check_buckets = check_buckets
        self.rule_code_in_files = rule_code_in_files
        self.registrar = Registrar(table)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def arn(self, name: str) -> str:
        return job_arn(name, self.region, self.account())

    # -- registering ----------------------------------------------------------------------------
    def register(self, spec: JobSpec, *, adopt_orphans: bool = True) -> str:
        """Write a validated spec; ``"registered"`` or ``"unchanged"``. Custom rules whose source may not
        be loaded start in ``Error``; steps seen before registration become pending (API doors)."""
        if self.check_buckets:
            ensure_bucket_exists(spec.trial_path)
        errors = {r.name: p for r in spec.rules if (p := rule_source_problem(r, self.allowed_rule_prefixes))}
        outcome = self.registrar.register(spec, self.arn(spec.name), self.now_ms(), errors)
        if outcome == "registered":
            self.registrar.forget_unnamed_failure(spec.trial_path)
        if adopt_orphans:
            steps = StepStore(self.table)
            for step, worker in steps.take_orphans(spec.trial_path):
                steps.record_worker(spec.name, step, worker, self.clock())
                steps.mark_pending(spec.name, step, 0)
            self._note_earlier_end(steps, spec)
        return outcome

    def _note_earlier_end(self, steps: StepStore, spec: JobSpec) -> None:
        """Training that ended before this registration left its end marker, whose notification found no
        job: note the end now (read after the registration committed, so a marker landing meanwhile is
        seen here or by its own notification). The scheduled check evaluates the adopted steps and
        completes the job. A trial this process cannot read is left to the idle timeout."""
        try:
            ended = end_marker_present(spec.trial_path)
        except OSError as exc:
            log.warning("cannot check the end marker of %s: %s", spec.trial_path, exc)
            return
        state = self.table.load_job(spec.name) if ended else None
        if state is not None and not state.end_marker_seen:
            steps.set_end_marker(state.name, len(listed_steps(state)), self.clock())

    def register_arguments(
        self,
        name: str,
        s3_output_path: str,
        rules: Any,
        hook_config: Any = None,
        num_workers: Any = None,
        idle_timeout_s: Any = None,
        profiler_rules: Any = None,
    ) -> JobSpec:
        spec = job_request.spec_from_arguments(
            name, s3_output_path, rules, hook_config, num_workers, profiler_rules
        )
        spec = _with_idle_timeout(spec, idle_timeout_s)
        self.register(spec)
        return spec

    def register_request(self, request: Mapping[str, Any], idle_timeout_s: Any = None) -> JobSpec:
        spec = _with_idle_timeout(job_request.spec_from_request(request), idle_timeout_s)
        self.register(spec)
        return spec

    def register_file(self, trial_path: str, key: str, data: bytes) -> tuple[str, str | None, str]:
        """A ``tornasole_job.json`` at ``trial_path``: ``(outcome, job name, reason)``, never raising for
        bad content; outcome ``"invalid"`` means a failed-registration record now says why."""
        path = f"{trial_path.rstrip('/')}/{key.rsplit('/', 1)[-1]}"
        name: str | None = None
        try:
            config = parse_job_file(data)
            if isinstance(config, Mapping):
                given = config.get("TrainingJobName") or config.get("training_job_name") or config.get("name")
                name = given if isinstance(given, str) and job_request.check_job_name_ok(given) else None
                if name is not None and not job_request.name_bound_to_trial(name, trial_path):
                    name = None  # a failure is recorded for the trial, never under someone else's name
            spec = job_request.spec_from_config(config, trial_path)
            spec = _with_idle_timeout(spec, config.get(IDLE_TIMEOUT_KEY), f"{IDLE_TIMEOUT_KEY} of {path}")
            scope = job_request.file_scope_problems(spec, trial_path)
            if scope:
                raise InvalidJobConfiguration(scope, job=spec.name)
            code = [r.name for r in spec.rules if r.source_s3_uri]
            if code and not self.rule_code_in_files:
                raise InvalidJobConfiguration(
                    f"a {key.rsplit('/', 1)[-1]} may not name rule code (custom rules {code}): whoever can "
                    "write training data could then run code in the evaluator; register custom rules "
                    "through the API or the CLI"
                )
            return self.register(spec, adopt_orphans=False), spec.name, ""
        except (ValueError, TypeError) as exc:  # InvalidJobConfiguration, JobConflictError, ...
            why = "; ".join(exc.problems) if isinstance(exc, InvalidJobConfiguration) else str(exc)
            reason = f"{path}: cannot register the job: {why}"
        log.warning(reason, extra={"key": key})
        if not self.registrar.record_failure(name, trial_path, key, reason, self.now_ms()):
            log.warning("job %s is registered; the failed file is recorded for its trial only", name)
        return "invalid", name, reason

    def update(
        self, name: str, rules: Any, s3_output_path: str | None = None, profiler_rules: Any = None
    ) -> None:
        """Replace a job's rules (and move it to ``s3_output_path`` when given and different).

        Debug rules (``rules``) and profiler rules (``profiler_rules``) are two sets, as in SageMaker's
        ``DebugRuleConfigurations`` and ``ProfilerRuleConfigurations``: each one given replaces that set
        whole (an empty list empties it), each one left ``None`` is kept as registered. An update that
        names only tensor rules therefore never drops the profiler rules it did not mention.
        """
        state = self.table.load_job(name)
        if state is None:
            raise JobNotFoundError(f"no training job named {name!r} is registered in table {self.table.name}")
        if rules is None and profiler_rules is None:
            raise InvalidJobConfiguration("an update names the debug rules, the profiler rules or both")
        registered = tuple(r.config for r in state.rules)
        named = normalise_rules(rules) if rules is not None else None
        debug = tuple(r for r in (registered if named is None else named) if not r.profiler)
        # RuleConfig(..., profiler=True) inside ``rules`` names profiler rules too (the one way before)
        profiler_named = tuple(r for r in named or () if r.profiler)
        if profiler_rules is not None:
            profiler = normalise_profiler_rules(profiler_rules) + profiler_named
        else:
            profiler = profiler_named or tuple(r for r in registered if r.profiler)
        new = debug + profiler
        if not new:
            raise InvalidJobConfiguration(f"job {name!r} would have no rule left: a job needs at least one")
        names = [r.name for r in new]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise InvalidJobConfiguration(
                "rule configuration names must be unique across debug and profiler rules; "
                f"repeated: {repeated}"
            )
        job_limits.check_job(new, None, name)
        path = None
        if s3_output_path is not None:
            path = job_request.spec_from_arguments(name, s3_output_path, new).trial_path
            if path != state.trial_path and self.check_buckets:
                ensure_bucket_exists(path)
        now_ms = self.now_ms()
        self.registrar.update_rules(name, new, now_ms, path)
        transitions = Transitions(self.table)
        for rule in new:
            problem = rule_source_problem(rule, self.allowed_rule_prefixes)
            if problem:
                transitions.apply(name, lambda s, n=rule.name, r=problem: to_error(s, n, r), now_ms)

    # -- reading back ---------------------------------------------------------------------------
    def describe(self, name: str) -> dict[str, Any]:
        """The DescribeTrainingJob-shaped dict (times as epoch-millisecond strings, as in events)."""
        state = self.table.load_job(name)
        if state is not None:
            return describe(state)
        entry = self.registrar.registry_entry(name)
        if entry and entry.get("failure_reason"):
            return self._failed(name, entry)
        raise JobNotFoundError(f"no training job named {name!r} is registered in table {self.table.name}")

    def rule_statuses(self, name: str) -> list[dict[str, Any]]:
        state = self.table.load_job(name)
        if state is None:
            return self.describe(name)["DebugRuleEvaluationStatuses"]
        return rule_statuses(state) + profiler_rule_statuses(state)  # as the SDK's rule_job_summary()

    def _failed(self, name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
        when = str(int(entry.get("failure_time", 0)))
        return {
            "TrainingJobName": name,
            "TrainingJobArn": self.arn(name),
            "TrainingJobStatus": "Failed",
            "SecondaryStatus": "Failed",
            "FailureReason": entry["failure_reason"],
            "DebugHookConfig": {"S3OutputPath": entry.get("trial_path", ""), "CollectionConfigurations": []},
            "DebugRuleConfigurations": [],
            "DebugRuleEvaluationStatuses": [],
            "CreationTime": when,
            "LastModifiedTime": when,
            "TornasoleJobConfigurationFile": entry.get("failure_key", ""),
        }

    def list_jobs(self) -> list[dict[str, Any]]:
        """One row per job: name, status, rules, issues, trial_path (+ failure_reason when failed)."""
        rows = []
        for item in self.registrar.registry():
            if item.get("failure_reason"):
                unnamed = item["sk"] == unnamed_failure_key(item.get("trial_path", ""))
                rows.append(
                    {
                        "name": None if unnamed else item["sk"],
                        "status": "Failed",
                        "rules": 0,
                        "issues": 0,
                        "trial_path": item.get("trial_path", ""),
                        "failure_reason": item["failure_reason"],
                    }
                )
                continue
            state = self.table.load_job(item["sk"])
            if state is None:
                continue
            row: dict[str, Any] = {
                "name": state.name,
                "status": state.status.value,
                "rules": len(state.rules),
                "issues": sum(r.status == RuleStatus.ISSUES_FOUND for r in state.rules),
                "trial_path": state.trial_path,
            }
            if state.failure_reason:
                row["failure_reason"] = state.failure_reason
            rows.append(row)
        return rows

"""A validated ``JobSpec`` from each way a job is asked for (pure; no I/O).

Three doors, one result: the Python/CLI arguments (``spec_from_arguments``),
a ``tornasole_job.json`` uploaded at a trial root (``spec_from_config``) and a
saved SageMaker ``CreateTrainingJob`` request (``spec_from_request``). Each
normalises the rules (``job_config``), merges the rules' collections into the
hook configuration as the union of their save steps (``collection_merge``),
and checks every limit (``job_limits``) before anything is written; a problem
raises ``InvalidJobConfiguration`` with the full list.

Trial paths: the arguments give the trial path itself. A ``CreateTrainingJob``
request follows SageMaker's convention: the hook of training job ``NAME``
writes to ``<DebugHookConfig.S3OutputPath>/NAME/debug-output``. A
configuration file is at its trial's root, which may be either of the two.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from tornasole.core.collection_merge import merge_collection_configurations
from tornasole.evaluator.models import JobSpec
from tornasole.evaluator.registration import job_limits
from tornasole.evaluator.registration.job_config import normalise_profiler_rules, normalise_rules
from tornasole.exceptions import ConfigurationError, InvalidJobConfiguration

__all__ = [
    "DEBUG_OUTPUT",
    "check_job_name",
    "check_job_name_ok",
    "file_scope_problems",
    "name_bound_to_trial",
    "sagemaker_trial_path",
    "spec_from_arguments",
    "spec_from_config",
    "spec_from_request",
]

#: The folder SageMaker's hook writes to under ``<S3OutputPath>/<TrainingJobName>``.
DEBUG_OUTPUT = "debug-output"
_JOB_NAME = re.compile(job_limits.JOB_NAME_PATTERN)
_RESOURCE_KEYS = ("InstanceType", "InstanceCount", "VolumeSizeInGB")
#: Request fields kept as sent, only to be shown by ``describe`` (bounded by the hook config's size limit).
_ECHOED = ("TensorBoardOutputConfig",)


def sagemaker_trial_path(s3_output_path: str, job_name: str) -> str:
    """``<S3OutputPath>/<TrainingJobName>/debug-output``: where SageMaker's hook writes the trial.

    Examples
    --------
    >>> sagemaker_trial_path("s3://bucket/", "my-job")
    's3://bucket/my-job/debug-output'
    """
    return f"{s3_output_path.rstrip('/')}/{job_name}/{DEBUG_OUTPUT}"


def check_job_name_ok(name: Any) -> bool:
    return isinstance(name, str) and bool(_JOB_NAME.match(name))


def check_job_name(name: Any) -> str:
    if not isinstance(name, str) or not _JOB_NAME.match(name):
        shown = name[:80] if isinstance(name, str) else name
        raise InvalidJobConfiguration(
            f"training job name {shown!r} must be 1-63 letters, digits or hyphens "
            f"({job_limits.JOB_NAME_PATTERN})"
        )
    return name


def name_bound_to_trial(name: str, trial_path: str) -> bool:
    """Whether a job file at ``trial_path`` may name job ``name``: the trial is ``<...>/<name>`` or
    SageMaker's ``<base>/<name>/debug-output``.

    Why: whoever can write training data can upload a job file, and a name is global. Unbound, a
    file anywhere could claim ``prod-training-42`` before its owner registers it (events would go
    out under that name, and the owner would get a ``JobConflictError``).

    Examples
    --------
    >>> name_bound_to_trial("j1", "s3://b/jobs/j1"), name_bound_to_trial("j1", "s3://b/out/j1/debug-output")
    (True, True)
    >>> name_bound_to_trial("prod-training-42", "s3://b/jobs/attacker")
    False
    """
    parts = trial_path.rstrip("/").split("/")
    return parts[-1] == name or (len(parts) > 2 and parts[-2:] == [name, DEBUG_OUTPUT])


def _within(path: str, trial: str) -> bool:
    if any(part in (".", "..") for part in path.split("://", 1)[-1].split("/")):
        return False
    path = path.rstrip("/")
    return path == trial or path.startswith(trial + "/")


def file_scope_problems(spec: JobSpec, trial_path: str) -> list[str]:
    """What a job FILE at ``trial_path`` may not ask for, though the API may: a name not bound to the
    trial (``name_bound_to_trial``) and other trials outside its own.

    Why: the evaluator reads ``other_trial_N`` with its own role; a data writer naming another
    job's trial would read that job's tensors through a rule (a confused deputy), and see its
    values in its own job's status.
    """
    trial = trial_path.rstrip("/")
    problems = []
    if not name_bound_to_trial(spec.name, trial):
        problems.append(
            f"a job file at {trial} may only register a job named {trial.rsplit('/', 1)[-1]!r} (or, at "
            f"<base>/<name>/{DEBUG_OUTPUT}, <name>); {spec.name!r} is registered through the API or CLI"
        )
    for rule in spec.rules:
        outside = [p for p in rule.other_trials if not _within(p, trial)]
        if outside:
            problems.append(
                f"rule {rule.name!r}: a job file may only compare with trials under its own {trial}; "
                f"{outside[0][:200]!r} is outside it (register the job through the API or CLI)"
            )
    return problems


def _s3_path(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.startswith("s3://") or len(value.split("/")[2]) < 3:
        raise InvalidJobConfiguration(f"{what} {value!r} must be an s3://bucket/prefix URI")
    return value.rstrip("/")


def _merged_hook_config(
    hook_config: Mapping[str, Any] | None, rules: Any, output_path: str
) -> tuple[dict[str, Any], list[str]]:
    """The user's hook config plus each builder rule's collections, duplicates merged as a union."""
    hook = dict(hook_config or {})
    hook["S3OutputPath"] = output_path
    colls = list(hook.get("CollectionConfigurations") or [])
    for r in rules if isinstance(rules, (list, tuple)) else ():
        colls.extend(getattr(r, "collections_to_save", ()) or ())
    try:
        merged, inexact = merge_collection_configurations(colls, hook.get("HookParameters"))
    except ConfigurationError as exc:
        raise InvalidJobConfiguration(f"DebugHookConfig: {exc}") from exc
    hook["CollectionConfigurations"] = merged
    return hook, inexact


def _build(
    name: str,
    trial_path: str,
    rules: Any,
    hook_config: Any,
    workers: Any,
    describe_fields: dict[str, Any] | None = None,
    hook_output: str | None = None,
    profiler_rules: tuple = (),
) -> JobSpec:
    """``hook_output``: the hook config's S3OutputPath when it is SageMaker's base, not the trial."""
    check_job_name(name)
    if hook_config is not None and not isinstance(hook_config, Mapping):
        raise InvalidJobConfiguration(f"DebugHookConfig must be an object, got {type(hook_config).__name__}")
    depth = job_limits.json_depth(hook_config)
    if depth > job_limits.MAX_JSON_DEPTH:
        raise InvalidJobConfiguration(
            f"DebugHookConfig is nested deeper than {job_limits.MAX_JSON_DEPTH} levels"
        )
    normalised = normalise_rules(rules) if rules or not profiler_rules else ()
    normalised += profiler_rules
    names = [r.name for r in normalised]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidJobConfiguration(
            f"rule configuration names must be unique across debug and profiler rules; repeated: {repeated}"
        )
    job_limits.check_job(normalised, hook_config, name)
    hook, _ = _merged_hook_config(hook_config, rules, hook_output or trial_path)
    too_big = job_limits.hook_size_problem(hook)  # the rules' collections are part of what is stored
    if too_big:
        raise InvalidJobConfiguration(too_big, job=name)
    return JobSpec(
        name=name,
        s3_output_path=trial_path,
        rules=normalised,
        hook_config=hook,
        num_workers=job_limits.num_workers(workers),
        describe_fields=describe_fields or None,
    )


def spec_from_arguments(
    name: str,
    s3_output_path: str,
    rules: Any,
    hook_config: Any = None,
    num_workers: Any = None,
    profiler_rules: Any = None,
) -> JobSpec:
    """``register_job(name, s3_output_path, rules, ...)``: the trial is ``s3_output_path`` itself.

    ``profiler_rules``: SageMaker's ``ProfilerRuleConfigurations`` entries (``ProfilerRule.sagemaker``'s
    payload), evaluated per profiler file; with them, ``rules`` may be empty.
    """
    path = _s3_path(s3_output_path, "S3 output path")
    profiler = normalise_profiler_rules(profiler_rules)
    return _build(check_job_name(name), path, rules, hook_config, num_workers, profiler_rules=profiler)


def _object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidJobConfiguration(f"{what} must be a JSON object, got {type(value).__name__}")
    depth = job_limits.json_depth(value)
    if depth > job_limits.MAX_JSON_DEPTH:
        raise InvalidJobConfiguration(f"{what} is nested deeper than {job_limits.MAX_JSON_DEPTH} levels")
    return value


def spec_from_config(config: Any, trial_path: str) -> JobSpec:
    """A ``tornasole_job.json`` found at ``trial_path`` (its keys: see ``tornasole.jobs``)."""
    config = _object(config, "the job configuration")
    name = config.get("TrainingJobName") or config.get("training_job_name") or config.get("name")
    if not name:
        raise InvalidJobConfiguration("the job configuration has no TrainingJobName")
    check_job_name(name)
    hook = config.get("DebugHookConfig")
    given = config.get("S3OutputPath") or config.get("s3_output_path")
    if not given and isinstance(hook, Mapping):
        given = hook.get("S3OutputPath")
    trial = trial_path.rstrip("/")
    base = None
    if given:
        base = _s3_path(given, "S3OutputPath")
        if trial not in (base, sagemaker_trial_path(base, name)):
            raise InvalidJobConfiguration(
                f"S3OutputPath {base} does not match the file's location {trial} "
                f"(expected {base} or {sagemaker_trial_path(base, name)})"
            )
    profiler = normalise_profiler_rules(config.get("ProfilerRuleConfigurations"))
    if "DebugRuleConfigurations" not in config and "rules_specification" not in config and not profiler:
        raise InvalidJobConfiguration(
            "the job configuration has neither DebugRuleConfigurations nor rules_specification"
        )
    workers = config.get("NumWorkers", config.get("num_workers"))
    rules = (
        config
        if not profiler or config.get("DebugRuleConfigurations") or config.get("rules_specification")
        else []
    )
    return _build(name, trial, rules, hook, workers, _resources(config), base, profiler)


def _resources(request: Mapping[str, Any]) -> dict[str, Any]:
    """The request fields ``describe`` shows as sent: ``ResourceConfig`` (checked) and ``_ECHOED``."""
    res = request.get("ResourceConfig")
    kept = {k: res[k] for k in _RESOURCE_KEYS if k in res} if isinstance(res, Mapping) else {}
    for key in ("InstanceCount", "VolumeSizeInGB"):
        value = kept.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise InvalidJobConfiguration(f"ResourceConfig.{key}={value!r} must be a whole number")
    itype = kept.get("InstanceType")
    if itype is not None and (not isinstance(itype, str) or len(itype) > 64):
        raise InvalidJobConfiguration(f"ResourceConfig.InstanceType={itype!r} is not an instance type")
    out: dict[str, Any] = {"ResourceConfig": kept} if kept else {}
    profiler_config = request.get("ProfilerConfig")
    if profiler_config is not None:
        out["ProfilerConfig"] = profiler_config_checked(profiler_config)
    for key in _ECHOED:
        value = request.get(key)
        if value is None:
            continue
        if (
            not isinstance(value, Mapping)
            or len(json.dumps(value, default=str)) > job_limits.MAX_HOOK_CONFIG_BYTES
        ):
            raise InvalidJobConfiguration(
                f"{key} must be an object of at most {job_limits.MAX_HOOK_CONFIG_BYTES} bytes"
            )
        out[key] = dict(value)
    return out


#: SageMaker's ProfilerConfig.ProfilingIntervalInMilliseconds values.
PROFILING_INTERVALS_MS = (100, 200, 500, 1000, 5000, 60000)


def profiler_config_checked(config: Any) -> dict[str, Any]:
    """SageMaker's ``ProfilerConfig`` (the SDK's payload) checked and kept for ``describe``: an optional
    ``S3OutputPath``, ``ProfilingIntervalInMilliseconds`` (one of SageMaker's values),
    ``ProfilingParameters`` (strings) and ``DisableProfiler``; errors name the field."""
    if not isinstance(config, Mapping):
        raise InvalidJobConfiguration(f"ProfilerConfig must be an object, got {type(config).__name__}")
    known = ("S3OutputPath", "ProfilingIntervalInMilliseconds", "ProfilingParameters", "DisableProfiler")
    unknown = sorted(set(config) - set(known))
    if unknown:
        raise InvalidJobConfiguration(
            f"ProfilerConfig: unknown field(s) {unknown}; fields: {', '.join(known)}"
        )
    out: dict[str, Any] = {}
    if config.get("S3OutputPath") is not None:
        out["S3OutputPath"] = _s3_path(config["S3OutputPath"], "ProfilerConfig.S3OutputPath")
    interval = config.get("ProfilingIntervalInMilliseconds")
    if interval is not None:
        if isinstance(interval, bool) or interval not in PROFILING_INTERVALS_MS:
            raise InvalidJobConfiguration(
                f"ProfilerConfig.ProfilingIntervalInMilliseconds={interval!r} must be one of "
                f"{PROFILING_INTERVALS_MS}"
            )
        out["ProfilingIntervalInMilliseconds"] = int(interval)
    params = config.get("ProfilingParameters")
    if params is not None:
        if (
            not isinstance(params, Mapping)
            or not all(
                isinstance(k, str) and isinstance(v, str) and len(k) <= 256 and len(v) <= 256
                for k, v in params.items()
            )
            or len(params) > 20
        ):
            raise InvalidJobConfiguration(
                "ProfilerConfig.ProfilingParameters must map at most 20 names to strings of at most "
                "256 characters"
            )
        out["ProfilingParameters"] = dict(params)
    if config.get("DisableProfiler") is not None:
        if not isinstance(config["DisableProfiler"], bool):
            raise InvalidJobConfiguration("ProfilerConfig.DisableProfiler must be true or false")
        out["DisableProfiler"] = config["DisableProfiler"]
    return out


def spec_from_request(request: Any) -> JobSpec:
    """A SageMaker ``CreateTrainingJob`` request, as the ``sagemaker`` SDK 2.x sends it.

    Keeps the rules (escaped ``action_json`` and numeric parameters included),
    the hook configuration with duplicate collections merged as a union, and
    ``ResourceConfig`` for ``describe``; the trial is SageMaker's
    ``<DebugHookConfig.S3OutputPath>/<TrainingJobName>/debug-output``, and
    ``describe`` echoes ``DebugHookConfig.S3OutputPath`` as sent (as SageMaker
    does, so the SDK's ``latest_job_debugger_artifacts_path()`` finds the trial).
    """
    request = _object(request, "the CreateTrainingJob request")
    name = check_job_name(request.get("TrainingJobName"))
    hook = request.get("DebugHookConfig")
    if not isinstance(hook, Mapping) or not hook.get("S3OutputPath"):
        raise InvalidJobConfiguration(
            "the CreateTrainingJob request has no DebugHookConfig.S3OutputPath: the SageMaker SDK adds one "
            "when rules or a DebuggerHookConfig are given"
        )
    profiler = normalise_profiler_rules(request.get("ProfilerRuleConfigurations"))
    if not request.get("DebugRuleConfigurations") and not profiler:
        raise InvalidJobConfiguration(
            "the CreateTrainingJob request has neither DebugRuleConfigurations nor ProfilerRuleConfigurations"
        )
    base = _s3_path(hook["S3OutputPath"], "DebugHookConfig.S3OutputPath")
    rules = request.get("DebugRuleConfigurations") or []
    trial = sagemaker_trial_path(base, name)
    return _build(name, trial, rules, hook, None, _resources(request), base, profiler)

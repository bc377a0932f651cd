"""``tornasole jobs register``: build rule configurations from options or a saved request, register, report.

Options (``--rule NAME[:k=v,...]``, ``--rule-file``/``--rule-class``,
``--action``) become SageMaker-shaped ``DebugRuleConfigurations``, and
``--profiler-rule NAME[:k=v,...]`` ``ProfilerRuleConfigurations`` (the entries
the SDK's ``ProfilerRule.sagemaker(...)`` sends); with no
rule option a new job gets the recommended set
(``tornasole.rules.recommended_rules()``), named in the output; a saved
``CreateTrainingJob`` request (``--from-request FILE``) goes to
:func:`tornasole.jobs.register_from_request` whole. A bucket that does not exist
is checked first (exit 3, as ``invoke`` says it); the rest of the validation is the
library's (:func:`tornasole.jobs.register_job` raises on a bad rule or parameter,
printed whole, exit 2); a rule that still ends up in ``Error`` right after
registration is reported with its full reason, exit 2. The line printed names the
trial path the evaluator watches (for a SageMaker request, not its ``S3OutputPath``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from tornasole.cli.errors import EXIT_OK, EXIT_USAGE
from tornasole.cli.rules_cmd import parse_param, parse_rule_spec
from tornasole.cli.watch import check_bucket

__all__ = ["profiler_rule_configurations", "read_request", "register", "rule_configurations"]


def _action_json(actions: list[str]) -> str | None:
    items = []
    for a in actions:
        kind, _, endpoint = a.partition(":")
        kind = kind.strip().lower()
        if kind == "stoptraining":
            items.append({"name": "stoptraining"})
        elif kind == "capture":  # capture[:STEPS[:COLLECTIONS]]; parse_actions bounds them at registration
            steps, _, collections = endpoint.partition(":")
            items.append(
                {
                    "name": "capture",
                    **({"steps": steps} if steps else {}),
                    **({"collections": collections} if collections else {}),
                }
            )
        elif kind in ("email", "sms", "webhook", "slack", "teams") and endpoint.strip():
            items.append({"name": kind, "endpoint": endpoint.strip()})
        else:
            raise ValueError(
                f"--action {a!r}: expected stoptraining, email:ADDRESS, sms:NUMBER, or webhook:NAME, "
                "slack:NAME, teams:NAME naming a destination the operator configured (docs/ALERTS.md), "
                "or capture[:STEPS[:COLLECTIONS]]"
            )
    return json.dumps(items) if items else None


def profiler_rule_configurations(args: argparse.Namespace) -> list[dict[str, Any]]:
    """``ProfilerRuleConfigurations`` entries from ``--profiler-rule`` (parameters as strings), the
    payload of the SDK's ``ProfilerRule.sagemaker(rule_configs.<rule>(), rule_parameters=...)``; names
    and parameters are checked by the library, as the tensor rules' are."""
    rules = []
    for spec in getattr(args, "profiler_rule", None) or []:
        name, params = parse_rule_spec(spec)
        rules.append({"RuleConfigurationName": name, "RuleParameters": {"rule_to_invoke": name, **params}})
    return rules


def rule_configurations(args: argparse.Namespace) -> list[dict[str, Any]] | None:
    """``DebugRuleConfigurations`` entries from the command line (all parameters as strings).

    With no tensor-rule option: the recommended set for a new job without profiler rules either; an
    empty list for a new job with profiler rules only; None (the registered ones are kept) for an
    ``--update`` of the profiler rules.
    """
    actions = _action_json(args.action)
    rules = []
    for spec in args.rule:
        name, params = parse_rule_spec(spec)
        params = {"rule_to_invoke": name, **params}
        if actions:
            params["action_json"] = actions
        rules.append({"RuleConfigurationName": name, "RuleParameters": params})
    if args.rule_file or args.rule_class:
        if not (args.rule_file and args.rule_class):
            raise ValueError("--rule-file and --rule-class go together")
        params = {"rule_to_invoke": args.rule_class, "source_s3_uri": _rule_source(args)}
        params.update(parse_param(args.rule_class, item) for item in args.rule_param)
        if actions:
            params["action_json"] = actions
        rules.append({"RuleConfigurationName": args.rule_class, "RuleParameters": params})
    if not rules:
        profiler = bool(getattr(args, "profiler_rule", None))
        if getattr(args, "update", False):
            if profiler:
                return None
            raise ValueError(
                "--update replaces the rules: give at least one --rule NAME or --rule-file F "
                "(or --profiler-rule NAME for the profiler rules)"
            )
        if profiler:
            return []
        rules = recommended_configurations(actions)
    return rules


def recommended_configurations(actions: str | None) -> list[dict[str, Any]]:
    """The recommended set (what a job gets when no rule is named), each with the ``--action`` given."""
    from tornasole.rules import recommended_rules

    rules = recommended_rules()
    if actions:
        for r in rules:
            r["RuleParameters"]["action_json"] = actions
    print(
        "no --rule given: registering the recommended rules: "
        + ", ".join(r["RuleConfigurationName"] for r in rules)
    )
    return rules


#: A rule source larger than this is not a rule file (and is not read whole).
MAX_RULE_FILE_BYTES = 1024 * 1024


def _rule_source(args: argparse.Namespace) -> str:
    """A local rule file is uploaded under the custom rule prefix, the only place a deployed stack
    loads rule code from (``--rules-prefix`` or ``$TORNASOLE_CUSTOM_RULES_PREFIX``), as
    ``<prefix>/<job>/<file>``. Without a prefix (local mode, where the trials prefix is the rule
    prefix) it goes next to the job's output, as before."""
    if args.rule_file.startswith("s3://"):
        return args.rule_file
    from tornasole.cli.errors import NotFoundError
    from tornasole.stack_spec import ENV_CUSTOM_RULES_PREFIX
    from tornasole.storage import get_storage, join

    try:
        data = _read_bounded(args.rule_file, MAX_RULE_FILE_BYTES, "rule file")
    except FileNotFoundError as exc:  # said as `invoke --rule-file` says it; exit 3
        raise NotFoundError(f"--rule-file {args.rule_file}: rule file not found") from exc
    prefix = getattr(args, "rules_prefix", None) or os.environ.get(ENV_CUSTOM_RULES_PREFIX, "")
    if prefix:
        if not prefix.startswith("s3://"):
            raise ValueError(f"--rules-prefix {prefix!r} must be an s3://bucket/prefix/ URI")
        target = join(prefix.rstrip("/"), args.name, os.path.basename(args.rule_file))
    else:
        target = join(args.s3_output, "tornasole_rules", os.path.basename(args.rule_file))
    get_storage(target).write_atomic(target, data)
    return target


def _read_bounded(path: str, cap: int, what: str) -> bytes:
    """At most ``cap`` bytes of ``path`` (one byte more is read to tell), never the whole of a
    ``/dev/zero`` or a mistaken multi-gigabyte file (#34 N11: 13 GB in 8 s before)."""
    with open(path, "rb") as f:  # FileNotFoundError names the path: exit 3
        data = f.read(cap + 1)
    if len(data) > cap:
        raise ValueError(f"{path}: a {what} is at most {cap} bytes; this one is larger")
    return data


def register(args: argparse.Namespace) -> int:
    from tornasole.cli.job_status import jobs_of, state_of
    from tornasole.jobs import update_job_rules

    if args.from_request:
        return _register_from_request(args)
    if not (args.name and args.s3_output):
        args.parser.error("give --name and --s3-output (or --from-request FILE)")
    jobs = jobs_of(args)
    check_bucket(args.s3_output, args.name)  # a missing bucket is "not found" (3), as `invoke` says it
    profiler_rules = profiler_rule_configurations(args)
    if args.update:
        rules = rule_configurations(args)
        current = state_of(jobs, args.name).trial_path
        desc = update_job_rules(
            args.name,
            rules,
            table_name=jobs.table.name,
            s3_output_path=args.s3_output,
            profiler_rules=profiler_rules or None,  # none named: the registered ones are kept
        )
        if current.rstrip("/") != args.s3_output.rstrip("/"):
            print(f"moved {args.name} from {current} to {args.s3_output}")
    else:
        rules = rule_configurations(args)
        desc = _register_new(jobs, args, rules, profiler_rules)
    output = (desc.get("DebugHookConfig") or {}).get("S3OutputPath") or args.s3_output
    _print_registered(jobs, desc["TrainingJobName"], desc["TrainingJobStatus"], output)
    return _after_registration(jobs, args.name)


def _register_new(
    jobs: Any,
    args: argparse.Namespace,
    rules: list[dict[str, Any]] | None,
    profiler_rules: list[dict[str, Any]],
) -> dict[str, Any]:
    """``register_job``; a job already registered with other rules or output names the CLI's ``--update``."""
    from tornasole.evaluator.registration.registrar import JobConflictError
    from tornasole.jobs import register_job

    try:
        return register_job(
            args.name,
            args.s3_output,
            rules,
            num_workers=args.num_workers,
            table_name=jobs.table.name,
            idle_timeout_s=args.idle_timeout,
            profiler_rules=profiler_rules,
        )
    except JobConflictError as exc:
        existing = jobs.table.load_job(args.name)
        if existing is None:  # the trial belongs to another job: the library's message says which
            raise
        raise JobConflictError(
            f"job {args.name!r} is already registered on {existing.trial_path} with rules "
            f"{', '.join(r.config.name for r in existing.rules)}: add --update to replace its rules "
            "(and --s3-output to move it)"
        ) from exc


def _print_registered(jobs: Any, name: str, status: str, output: str) -> None:
    """The registration, on the trial path the evaluator watches (where the hook must write).

    A SageMaker request's ``S3OutputPath`` is not that path: SageMaker's hook writes under
    ``<S3OutputPath>/<TrainingJobName>/debug-output``, so both are said.
    """
    from tornasole.cli.job_status import state_of

    trial = state_of(jobs, name).trial_path
    print(f"registered {name} ({status}) on {trial}")
    if output and output.rstrip("/") != trial.rstrip("/"):
        print(
            "the hook must write there: SageMaker's <S3OutputPath>/<TrainingJobName>/debug-output, "
            f"from {output}"
        )


def _after_registration(jobs: Any, name: str) -> int:
    """Print the job's rules; a rule already in ``Error`` is an invalid input: its full reason, exit 2."""
    from tornasole.cli.job_status import print_status, state_of

    state = state_of(jobs, name)
    print_status(jobs, name)
    _print_input_warnings(jobs.describe(name))
    failed = [r for r in state.rules if r.status.value == "Error"]
    for r in failed:
        print(
            f"tornasole: error: rule {r.config.name} of job {name}: {r.details or 'Error'}", file=sys.stderr
        )
    return EXIT_USAGE if failed else EXIT_OK


def _print_input_warnings(desc: dict[str, Any]) -> None:
    """The rules the job's hook configuration gives nothing to read, said before training starts."""
    from tornasole.rules.inputs import INPUT_WARNINGS_FIELD

    unreadable = desc.get(INPUT_WARNINGS_FIELD) or []
    if unreadable:
        print(f"\n{len(unreadable)} rule(s) will see nothing with this hook configuration:")
    for w in unreadable:
        print(f"  {w['Reason']}")


def read_request(path: str) -> dict[str, Any]:
    """A saved ``CreateTrainingJob`` request: a JSON object (errors name the file and the position)."""
    from tornasole.evaluator.registration.job_limits import MAX_JOB_FILE_BYTES

    data = _read_bounded(path, MAX_JOB_FILE_BYTES, "CreateTrainingJob request")
    try:
        request = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except RecursionError:
        raise ValueError(f"{path}: the JSON is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    if not isinstance(request, dict):
        raise ValueError(
            f"{path}: expected a JSON object (a CreateTrainingJob request), got {type(request).__name__}"
        )
    return request


def _register_from_request(args: argparse.Namespace) -> int:
    given = (
        ("--name", args.name),
        ("--s3-output", args.s3_output),
        ("--rule", args.rule),
        ("--profiler-rule", getattr(args, "profiler_rule", None)),
    )
    clash = [o for o, v in given if v]
    if clash or args.rule_file or args.update:
        extra = ", ".join(clash) or "--update/--rule-file"
        args.parser.error(f"--from-request takes name, output and rules from the file; drop {extra}")
    request = read_request(args.from_request)
    hook = request.get("DebugHookConfig")
    output = hook.get("S3OutputPath") if isinstance(hook, dict) else None
    if isinstance(output, str) and isinstance(request.get("TrainingJobName"), str):
        check_bucket(output, request["TrainingJobName"])
    if args.table:
        os.environ["TORNASOLE_STATE_TABLE"] = args.table  # register_from_request reads the standard variable
    from tornasole.cli.job_status import jobs_of
    from tornasole.jobs import register_from_request

    extra = {} if args.idle_timeout is None else {"idle_timeout_s": args.idle_timeout}
    result = register_from_request(request, **extra)
    name = result.get("TrainingJobName") if isinstance(result, dict) else None
    name = name or request.get("TrainingJobName")
    if not name:
        raise ValueError(f"{args.from_request}: the request has no TrainingJobName")
    jobs = jobs_of(args)
    desc = jobs.describe(name)
    output = (desc.get("DebugHookConfig") or {}).get("S3OutputPath", "")
    _print_registered(jobs, name, desc["TrainingJobStatus"], output)
    return _after_registration(jobs, name)

"""``tornasole jobs register|list|status|logs``: jobs on the evaluator (local endpoint or AWS).

Everything goes through ``tornasole.jobs`` and the state table named by
``TORNASOLE_STATE_TABLE`` (or ``--table``); endpoints and credentials are
boto3's standard configuration, so the same commands work against
``tornasole local up`` and a deployed stack.

A ``tornasole_job.json`` that could not be registered is a ``Failed`` record:
``list`` shows it (by its trial when the file named no job) with its reason,
``status`` shows its full reason.

Exit codes (:mod:`tornasole.cli.errors`): ``register`` 2 on invalid input
(the whole reason printed) or when a rule ended in ``Error``, 3 when the bucket
or the ``--rule-file`` does not exist; ``status`` 2 for
a failed registration (its configuration file was invalid input); ``status
--fail-on-issues`` 1 when a rule found issues or failed; ``status --watch``
3 when the job's bucket does not exist or nothing changed for ``--timeout``
seconds; ``logs --rule`` 3 for a rule the job does not have.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import Any

from tornasole.cli.errors import EXIT_ISSUES, EXIT_OK, EXIT_USAGE, NotFoundError, did_you_mean
from tornasole.cli.job_status import jobs_of, print_status, state_of, status_rows
from tornasole.cli.jobs_register import register
from tornasole.cli.options import non_negative_float, positive_float, positive_int
from tornasole.cli.table import cell_width, format_table

__all__ = ["add_parser", "check_rule_of_job", "jobs_of", "print_status", "state_of", "status_rows"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("jobs", help="register jobs and follow their rule evaluations")
    p.add_argument("--table", help="state table (default $TORNASOLE_STATE_TABLE or tornasole-state)")
    jsub = p.add_subparsers(dest="jobs_command", metavar="SUBCOMMAND", required=True)

    reg = jsub.add_parser("register", help="register a training job and its rules")
    reg.add_argument("--name", help="training job name")
    reg.add_argument("--s3-output", help="s3://bucket/prefix the hook writes to")
    reg.add_argument(
        "--from-request",
        metavar="FILE",
        help="a saved SageMaker CreateTrainingJob request (JSON): name, output and rules from it",
    )
    reg.add_argument(
        "--rule",
        action="append",
        default=[],
        metavar="NAME[:k=v,...]",
        help="built-in rule (repeatable); a list parameter takes comma-separated values "
        "(AllZero:collection_names=weights,gradients)",
    )
    reg.add_argument(
        "--profiler-rule",
        action="append",
        default=[],
        metavar="NAME[:k=v,...]",
        help="profiler rule (repeatable), sent as a ProfilerRuleConfigurations entry, as the SDK's "
        "ProfilerRule.sagemaker(...) does (LowGPUUtilization:threshold_p95=60,window=200); "
        "`tornasole rules list` names them and their parameters",
    )
    reg.add_argument("--rule-file", help="custom rule source (.py, local path or s3://)")
    reg.add_argument("--rule-class", help="class to load from --rule-file")
    reg.add_argument(
        "--rules-prefix",
        metavar="S3_PREFIX",
        help="where a local --rule-file is uploaded: the stack's custom rule prefix "
        "(default $TORNASOLE_CUSTOM_RULES_PREFIX; without one, next to the output, as local mode reads it)",
    )
    reg.add_argument("--rule-param", action="append", default=[], metavar="K=V", help="custom rule parameter")
    reg.add_argument(
        "--action",
        action="append",
        default=[],
        metavar="ACTION",
        help="stoptraining | capture[:STEPS[:COLLECTIONS]] | email:ADDRESS | sms:NUMBER | webhook:NAME | "
        "slack:NAME | teams:NAME "
        "(NAME: a destination the operator configured)",
    )
    reg.add_argument(
        "--num-workers", type=positive_int, help="workers writing each step (default: from the trial)"
    )
    reg.add_argument(
        "--idle-timeout",
        type=float,  # the range (1 s to 30 days) is the library's check, whose message names idle_timeout_s
        metavar="SECONDS",
        help="end the job (Failed, IdleTimeout) after this long without new data (default: 6 hours)",
    )
    reg.add_argument(
        "--update",
        action="store_true",
        help="replace the rules of an existing job: the tensor rules when a --rule/--rule-file is given, "
        "the profiler rules when a --profiler-rule is given; a kind not named is kept",
    )
    reg.set_defaults(func=register, parser=reg)

    ls = jsub.add_parser("list", help="registered jobs")
    ls.set_defaults(func=_list)

    st = jsub.add_parser("status", help="a job's rules, statuses, first issue step and details")
    st.add_argument("name")
    st.add_argument("--watch", action="store_true", help="refresh until the job is no longer InProgress")
    st.add_argument(
        "--interval", type=positive_float, default=2.0, help="seconds between refreshes with --watch"
    )
    st.add_argument(
        "--timeout",
        type=non_negative_float,
        default=300.0,
        help="with --watch: give up (exit 3) when nothing changed for this many seconds (default 300)",
    )
    st.add_argument(
        "--fail-on-issues",
        action="store_true",
        help="exit 1 when a rule is IssuesFound or Error (for scripts and CI; NothingEvaluated is neither)",
    )
    st.add_argument("--json", action="store_true", help="print the DescribeTrainingJob-shaped dict")
    st.set_defaults(func=_status)

    lg = jsub.add_parser("logs", help="per-step evaluation log of a job's rules")
    lg.add_argument("name")
    lg.add_argument("--rule", help="only this rule")
    lg.add_argument("--issues-only", action="store_true", help="only the steps where a rule fired or failed")
    lg.add_argument(
        "--log-group",
        help="read the evaluator's CloudWatch log lines for the job (and --rule) from this log group instead",
    )
    lg.set_defaults(func=_logs)


def _list(args: argparse.Namespace) -> int:
    from tornasole.jobs.listing import list_jobs

    table = jobs_of(args).table
    jobs = list_jobs(table)
    rows = [[j["name"] or UNNAMED, j["status"], j["rules"], j["issues"], j["trial_path"]] for j in jobs]
    if not rows:
        print(f"no jobs registered in table {table.name} (tornasole jobs register adds one)")
        return EXIT_OK
    print(format_table(["job", "status", "rules", "issues found", "trial"], rows, max_width=cell_width(80)))
    failed = [j for j in jobs if j.get("failure_reason")]
    if failed:  # whole reasons, below the table: a table cell would cut them
        print("\nfailed registrations:")
        for j in failed:
            print(f"  {j['name'] or j['trial_path']}: {j['failure_reason']}")
    return EXIT_OK


#: The ``job`` cell of a failed registration whose file named no job (its trial column says where).
UNNAMED = "(no name)"


def _print_failed_registration(desc: dict[str, Any]) -> int:
    """A failed registration: its status, configuration file and whole reason; exit 2 (invalid input)."""
    print(f"job {desc['TrainingJobName']}: Failed")
    where = desc.get("TornasoleJobConfigurationFile") or ""
    if where:
        print(f"configuration file: {where}")
    print(f"reason: {desc.get('FailureReason', '')}")
    print("fix the file and upload it again: the job then registers and this record goes away")
    return EXIT_USAGE


def _json_default(value: Any) -> str:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _issue_code(args: argparse.Namespace, rows: list[list[Any]]) -> int:
    if args.fail_on_issues and any(r[1] in ("IssuesFound", "Error") for r in rows):
        return EXIT_ISSUES
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    jobs = jobs_of(args)
    desc = jobs.describe(args.name)  # a failed registration too; JobNotFoundError (exit 3) when neither
    statuses = desc.get("DebugRuleEvaluationStatuses", []) + desc.get("ProfilerRuleEvaluationStatuses", [])
    failed_registration = "FailureReason" in desc and not statuses
    if args.json:
        print(json.dumps(desc, indent=2, default=_json_default))
        if failed_registration:
            return EXIT_USAGE
        rows = [[s.get("RuleConfigurationName"), s.get("RuleEvaluationStatus")] for s in statuses]
        return _issue_code(args, rows)
    if failed_registration:
        return _print_failed_registration(desc)
    if args.watch:
        from tornasole.cli.watch import watch_job

        watch_job(jobs, args.name, interval=args.interval, timeout=args.timeout)
    else:
        print_status(jobs, args.name)
    return _issue_code(args, status_rows(jobs, args.name)[1])


def _cloudwatch_logs(args: argparse.Namespace) -> int:
    from tornasole.jobs.logs import rule_log

    printed = 0
    for line in rule_log(args.name, args.rule, args.log_group):
        where = " ".join(f"{k}={line[k]}" for k in ("rule", "step") if line.get(k) is not None)
        print(
            f"{line.get('timestamp', '')} {line.get('level', '')} {where} {line.get('message', '')}".strip()
        )
        printed += 1
    if not printed:
        what = f"job {args.name!r}" + (f" rule {args.rule!r}" if args.rule else "")
        print(f"no log lines for {what} in log group {args.log_group}", file=sys.stderr)
    return EXIT_OK


def check_rule_of_job(state: Any, rule: str) -> None:
    """Raise :class:`NotFoundError` (did you mean, the job's rules) unless the job has ``rule``."""
    names = [r.config.name for r in state.rules]
    if rule not in names:
        hint = did_you_mean(rule, names)
        raise NotFoundError(f"job {state.name!r} has no rule {rule!r}{hint}; its rules: {', '.join(names)}")


def _logs(args: argparse.Namespace) -> int:
    if args.log_group:
        return _cloudwatch_logs(args)
    jobs = jobs_of(args)
    state = state_of(jobs, args.name)
    if args.rule:
        check_rule_of_job(state, args.rule)
    names = [args.rule] if args.rule else [r.config.name for r in state.rules]
    rows = []
    for rule in names:
        for rec in jobs.rule_evaluations(args.name, rule):
            fired, error = bool(rec.get("fired")), rec.get("error")
            if args.issues_only and not (fired or error):
                continue
            outcome = "ERROR" if error else ("FIRED" if fired else "ok")
            mode_step = rec.get("mode_step")
            mode = f"{rec.get('mode') or ''} {'' if mode_step is None else mode_step}".strip()
            rows.append([rule, rec.get("step"), mode, outcome, error or rec.get("details") or ""])
    rows.sort(key=lambda r: (r[1] if r[1] is not None else -1, r[0]))
    if not rows:
        what = "no step where a rule fired or failed" if args.issues_only else "no step evaluated yet"
        print(f"job {args.name}: {what} ({', '.join(names)})")
        return EXIT_OK
    print(format_table(["rule", "step", "mode", "outcome", "details"], rows, max_width=cell_width(90)))
    return EXIT_OK

"""``tornasole jobs register|list|status|logs``: jobs on the evaluator (local endpoint or AWS).

Everything goes through ``tornasole.jobs`` and the state table named by
``TORNASOLE_STATE_TABLE`` (or ``--table``); endpoints and credentials are
boto3's standard configuration, so the same commands work against
``tornasole local up`` and a deployed stack.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from tornasole.cli.rules_cmd import parse_rule_spec
from tornasole.cli.table import format_table

__all__ = ["add_parser", "fired_steps", "print_status", "rule_configurations", "status_rows"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("jobs", help="register jobs and follow their rule evaluations")
    p.add_argument("--table", help="state table (default $TORNASOLE_STATE_TABLE or tornasole-state)")
    jsub = p.add_subparsers(dest="jobs_command", metavar="SUBCOMMAND", required=True)

    reg = jsub.add_parser("register", help="register a training job and its rules")
    reg.add_argument("--name", required=True, help="training job name")
    reg.add_argument("--s3-output", required=True, help="s3://bucket/prefix the hook writes to")
    reg.add_argument("--rule", action="append", default=[], metavar="NAME[:k=v,...]", help="built-in rule")
    reg.add_argument("--rule-file", help="custom rule source (.py, local path or s3://)")
    reg.add_argument("--rule-class", help="class to load from --rule-file")
    reg.add_argument("--rule-param", action="append", default=[], metavar="K=V", help="custom rule parameter")
    reg.add_argument(
        "--action",
        action="append",
        default=[],
        metavar="ACTION",
        help="stoptraining | email:ADDRESS | sms:NUMBER",
    )
    reg.add_argument("--num-workers", type=int, help="workers writing each step (default: from the trial)")
    reg.add_argument("--update", action="store_true", help="replace the rules of an existing job")
    reg.set_defaults(func=_register)

    ls = jsub.add_parser("list", help="registered jobs")
    ls.set_defaults(func=_list)

    st = jsub.add_parser("status", help="a job's rules, statuses, first issue step and details")
    st.add_argument("name")
    st.add_argument("--watch", action="store_true", help="refresh until the job is no longer InProgress")
    st.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes with --watch")
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


def _jobs(args: argparse.Namespace) -> Any:
    from tornasole.jobs import TornasoleJobs

    return TornasoleJobs(getattr(args, "table", None))


def _action_json(actions: list[str]) -> str | None:
    items = []
    for a in actions:
        kind, _, endpoint = a.partition(":")
        kind = kind.strip().lower()
        if kind == "stoptraining":
            items.append({"name": "stoptraining"})
        elif kind in ("email", "sms") and endpoint.strip():
            items.append({"name": kind, "endpoint": endpoint.strip()})
        else:
            raise ValueError(f"--action {a!r}: expected stoptraining, email:ADDRESS or sms:NUMBER")
    return json.dumps(items) if items else None


def rule_configurations(args: argparse.Namespace) -> list[dict[str, Any]]:
    """``DebugRuleConfigurations`` entries from the command line (all parameters as strings)."""
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
        for item in args.rule_param:
            params.update(parse_rule_spec(f"{args.rule_class}:{item}")[1])
        if actions:
            params["action_json"] = actions
        rules.append({"RuleConfigurationName": args.rule_class, "RuleParameters": params})
    if not rules:
        raise ValueError("give at least one --rule NAME or --rule-file F --rule-class C")
    return rules


def _rule_source(args: argparse.Namespace) -> str:
    """A local rule file is uploaded next to the job's output, where the evaluator can read it."""
    if args.rule_file.startswith("s3://"):
        return args.rule_file
    from tornasole.storage import get_storage, join

    with open(args.rule_file, "rb") as f:
        data = f.read()
    target = join(args.s3_output, "tornasole_rules", os.path.basename(args.rule_file))
    get_storage(target).write_atomic(target, data)
    return target


def _register(args: argparse.Namespace) -> int:
    jobs = _jobs(args)
    rules = rule_configurations(args)
    if args.update:
        desc = jobs.update_job_rules(args.name, rules)
    else:
        desc = jobs.register_job(args.name, args.s3_output, rules, num_workers=args.num_workers)
    print(f"registered {desc['TrainingJobName']} ({desc['TrainingJobStatus']}) on {args.s3_output}")
    print_status(jobs, args.name)
    return 0


def _list(args: argparse.Namespace) -> int:
    from tornasole.jobs.listing import list_jobs

    rows = [
        [j["name"], j["status"], j["rules"], j["issues"], j["trial_path"]]
        for j in list_jobs(_jobs(args).table)
    ]
    print(format_table(["job", "status", "rules", "issues found", "trial"], rows))
    return 0


def _state(jobs: Any, name: str) -> Any:
    from tornasole.jobs import JobNotFoundError

    state = jobs.table.load_job(name)
    if state is None:
        raise JobNotFoundError(f"no training job named {name!r} is registered in table {jobs.table.name}")
    return state


def status_rows(jobs: Any, name: str) -> tuple[str, list[list[Any]]]:
    """The job's status and one row per rule: name, status, first issue step, details."""
    state = _state(jobs, name)
    rows = [[r.config.name, r.status.value, r.issue_step, r.details or ""] for r in state.rules]
    return state.status.value, rows


def print_status(jobs: Any, name: str) -> str:
    status, rows = status_rows(jobs, name)
    print(f"job {name}: {status}")
    print(format_table(["rule", "status", "first issue step", "details"], rows, max_width=90))
    return status


def _status(args: argparse.Namespace) -> int:
    jobs = _jobs(args)
    if args.json:
        print(json.dumps(jobs.describe(args.name), indent=2, default=str))  # datetimes as text
        return 0
    while True:
        status = print_status(jobs, args.name)
        if not args.watch or status not in ("InProgress", "Stopping"):
            return 0
        time.sleep(args.interval)
        print()


def _cloudwatch_logs(args: argparse.Namespace) -> int:
    from tornasole.jobs.logs import rule_log

    for line in rule_log(args.name, args.rule, args.log_group):
        where = " ".join(f"{k}={line[k]}" for k in ("rule", "step") if line.get(k) is not None)
        print(
            f"{line.get('timestamp', '')} {line.get('level', '')} {where} {line.get('message', '')}".strip()
        )
    return 0


def _logs(args: argparse.Namespace) -> int:
    if args.log_group:
        return _cloudwatch_logs(args)
    jobs = _jobs(args)
    state = _state(jobs, args.name)
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
    print(format_table(["rule", "step", "mode", "outcome", "details"], rows, max_width=90))
    return 0


def fired_steps(job: str, table: str | None = None) -> dict[str, list[int]]:
    """Rule name -> global steps where it fired (for plots)."""
    from tornasole.jobs import TornasoleJobs

    jobs = TornasoleJobs(table)
    state = _state(jobs, job)
    out: dict[str, list[int]] = {}
    for r in state.rules:
        steps = [int(rec["step"]) for rec in jobs.rule_evaluations(job, r.config.name) if rec.get("fired")]
        if steps:
            out[r.config.name] = sorted(steps)
    return out

"""``tornasole report JOB|TRIAL -o report.html``: one self-contained HTML page about a job.

JOB is a registered job's name, read from the state table as ``tornasole jobs status`` reads it
(``--table``; the local mode's table when its endpoint is set); TRIAL is a local directory or an
``s3://`` URI, for which the recommended rules are evaluated here first, as ``tornasole invoke`` would,
so the page has verdicts. A target that looks like a path (``/``, ``.``, ``s3://``) or is an existing
directory is a trial; anything else is a job name (SageMaker's job names have neither).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Any

from tornasole.cli.options import non_negative_float

__all__ = ["add_parser", "is_trial_target"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="write a job's HTML report (verdicts, loss, layer statistics, profiler)",
        description="Write one self-contained HTML file (inline CSS and SVG: it opens without a network) "
        "with the job's rule verdicts, the steps where each fired and what to do, loss curves, per-layer "
        "norms and, when the trial has profiler-output/, utilisation, step times and the phase breakdown. "
        "JOB|TRIAL is a registered job's name or a trial (a directory or s3:// URI); for a trial the "
        "recommended rules are evaluated here first.",
    )
    p.add_argument(
        "target", metavar="JOB|TRIAL", help="registered job name, trial directory or s3://bucket/prefix"
    )
    p.add_argument("-o", "--output", default="report.html", help="HTML file to write (default report.html)")
    p.add_argument("--table", help="state table of a JOB (default $TORNASOLE_STATE_TABLE or tornasole-state)")
    p.add_argument(
        "--timeout",
        type=non_negative_float,
        default=0.0,
        help="seconds to wait for a TRIAL to appear (default 0: it must be there)",
    )
    p.set_defaults(func=_report)


def is_trial_target(target: str) -> bool:
    """Whether ``target`` names a trial (a path) rather than a registered job.

    >>> is_trial_target("s3://b/run"), is_trial_target("./run"), is_trial_target("my-job-1")
    (True, True, False)
    """
    return target.startswith(("s3://", ".")) or "/" in target or os.path.isdir(target)


def _job_html(args: argparse.Namespace) -> str:
    from tornasole.cli.job_status import jobs_of, state_of
    from tornasole.evaluator.store.step_store import StepStore
    from tornasole.reports import job_report_html

    jobs = jobs_of(args)
    state = state_of(jobs, args.target)  # JobNotFoundError (exit 3) naming the job and the table
    detail = jobs.describe(args.target, datetimes=False)
    steps = StepStore(jobs.table)
    fired = {r.config.name: steps.fired_steps(args.target, r.config.name) for r in state.rules}
    return job_report_html(detail, fired)


def _trial_html(args: argparse.Namespace) -> str:
    from tornasole.cli.invoke_report import wait_for_trial
    from tornasole.reports import trial_report_html

    return trial_report_html(args.target, open_trial=lambda path: wait_for_trial(path, args.timeout))


def _write(path: str, text: str) -> None:
    """Write whole or not at all: a half-written report is never left at ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would hide the report from a web server or a colleague
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _report(args: argparse.Namespace) -> int:
    html = _trial_html(args) if is_trial_target(args.target) else _job_html(args)
    _write(args.output, html)
    rules = html.count('<tr class="verdict"')
    issues = html.count('<tr class="verdict" data-status="IssuesFound"')
    print(f"wrote {args.output} ({len(html.encode()) / 1024:.0f} KiB): {rules} rules, {issues} found issues")
    sys.stdout.flush()
    return 0

"""``python -m tornasole.rules.rule_invoker``: run one rule over a trial from the command line.

Usage::

    python -m tornasole.rules.rule_invoker --trial-dir PATH --rule-name NAME
        [--rule-file FILE] [--other-trials "P1;P2"] [--start-step N] [--end-step N]
        [--<param> VALUE ...]

Options may be written with dashes or underscores (``--end_step``, as the 2019
documentation did). Every option the invoker does not know is a rule parameter
(``--threshold 0.001``; a bare ``--flag`` means ``True``). ``--rule-file``
(local or ``s3://``) loads a custom rule named ``--rule-name`` from that file;
otherwise ``--rule-name`` is a built-in.

``--timeout`` (default 10 s) bounds the wait for a trial to appear at
``--trial-dir`` (a collections file, an index file or the end marker): a path
where nothing arrives is an error naming the path and what was looked for,
not a silent wait. A trial without its end marker is live: the invoker says
so, then evaluates steps as they land until training ends (or ``--end-step``),
giving up after ``--idle-timeout`` seconds (default 1800) without a new step.
Progress goes to stderr ("3/5 steps, fired 2 times").

Output: the details of each fire (at most 20), then one line a script can parse, last on stdout::

    RESULT rule=VanishingGradient status=IssuesFound first_step=3 fired_steps=3,4 steps_evaluated=10 \
        steps_skipped=0

(one line, wrapped here; ``none`` stands for "no step": ``first_step=none fired_steps=none`` when it
never fired; ``fired_steps`` is comma-separated, at most 20 listed; ``steps_skipped`` counts saved
steps where the rule's tensors were missing). ``tornasole invoke`` prints the same line (same
function, :func:`result_line`). Exit code: 0 no issue, 1 issues found, 2 usage or invalid input
(a misspelt rule too, as in every ``tornasole`` command), 3 not found (no trial at the path, missing
file) or a wait that timed out; errors are
one line on stderr,
``ERROR ...``.

The command's code lives in ``tornasole.cli`` (it prints for a person at a terminal);
``tornasole.rules.rule_invoker`` is the path smdebug's users run and import.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from tornasole.cli.invoke_report import (
    check_builtin_rule,
    print_verdict,
    result_line,
    run_rule,
    wait_for_trial,
)
from tornasole.rules.step_loop import InvokeSummary

__all__ = ["main", "parse_args", "result_line", "summary_line"]

EXIT_OK, EXIT_ISSUES, EXIT_ERROR, EXIT_NOT_FOUND = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one ``ERROR ...`` line (the CLI's contract), exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        print(f"ERROR {message} (see --help)", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m tornasole.rules.rule_invoker",
        description="Run a built-in or custom rule over a trial; unknown --options are rule parameters.",
        epilog="exit codes: 0 no issue, 1 issues found, 2 usage or invalid input, 3 not found",
    )
    p.add_argument("--trial-dir", "--trial_dir", dest="trial_dir", required=True)
    p.add_argument("--rule-name", "--rule_name", dest="rule_name", required=True)
    p.add_argument("--rule-file", "--rule_file", dest="rule_file")
    p.add_argument("--other-trials", "--other_trials", dest="other_trials", help='paths separated by ";"')
    p.add_argument("--start-step", "--start_step", dest="start_step", type=int, default=0)
    p.add_argument("--end-step", "--end_step", dest="end_step", type=int)
    p.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="seconds to wait for a trial to appear at --trial-dir (default 10)",
    )
    p.add_argument(
        "--idle-timeout",
        "--idle_timeout",
        dest="idle_timeout",
        type=float,
        default=1800.0,
        help="live trial: give up when no new step lands for this many seconds (default 1800)",
    )
    p.add_argument("--log-level", "--log_level", dest="log_level", default="WARNING")
    return p


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, dict[str, str]]:
    """Split ``argv`` into invoker options and ``{parameter: string value}``.

    Examples
    --------
    >>> ns, params = parse_args(["--trial-dir", "/t", "--rule-name", "X", "--threshold", "0.1", "--flag"])
    >>> ns.rule_name, params
    ('X', {'threshold': '0.1', 'flag': 'True'})
    """
    ns, rest = _parser().parse_known_args(list(argv))
    params: dict[str, str] = {}
    i = 0
    while i < len(rest):
        tok = rest[i]
        if not tok.startswith("--") or len(tok) == 2:
            raise ValueError(f"unexpected argument {tok!r}: rule parameters are written --name value")
        key, eq, value = tok[2:].partition("=")
        key = key.replace("-", "_")
        if not eq:
            if i + 1 < len(rest) and not rest[i + 1].startswith("--"):
                value = rest[i + 1]
                i += 1
            else:
                value = "True"
        params[key] = value
        i += 1
    return ns, params


def summary_line(summary: InvokeSummary) -> str:
    """The ``RESULT ...`` line (smdebug-era name; see :func:`tornasole.cli.invoke_report.result_line`)."""
    return result_line(summary)


def _build_rule(ns: argparse.Namespace, params: dict[str, str]):
    from tornasole.rules.loader import create_custom_rule
    from tornasole.rules.registry import create_rule, other_trial_paths

    if not ns.rule_file:
        check_builtin_rule(ns.rule_name)
    base = wait_for_trial(ns.trial_dir, ns.timeout)
    paths, params = other_trial_paths(params)
    if ns.other_trials:
        paths = [p.strip() for p in ns.other_trials.replace(",", ";").split(";") if p.strip()] + paths
    others = [wait_for_trial(p, ns.timeout) for p in paths] or None
    if ns.rule_file:
        return create_custom_rule(ns.rule_file, ns.rule_name, base, other_trials=others, **params)
    return create_rule(ns.rule_name, base, other_trials=others, **params)


def _exit_code(exc: BaseException) -> int:
    from tornasole.exceptions import MissingCollectionFiles, TensorUnavailable

    not_found = (LookupError, FileNotFoundError, TimeoutError, TensorUnavailable, MissingCollectionFiles)
    return EXIT_NOT_FOUND if isinstance(exc, not_found) else EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except BrokenPipeError:  # the reader went away (| head): stop quietly
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_OK


def _main(argv: Sequence[str]) -> int:
    try:
        ns, params = parse_args(argv)
    except SystemExit as exc:  # argparse already printed its usage error
        return EXIT_ERROR if exc.code else EXIT_OK
    except ValueError as exc:
        print(f"ERROR {exc}", file=sys.stderr)
        return EXIT_ERROR
    logging.basicConfig(level=getattr(logging, str(ns.log_level).upper(), logging.WARNING))
    try:
        rule = _build_rule(ns, params)
        summary = run_rule(rule, start_step=ns.start_step, end_step=ns.end_step, idle_timeout=ns.idle_timeout)
    except KeyboardInterrupt:
        print("ERROR interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise
    except Exception as exc:  # noqa: BLE001 - the CLI's contract: one line, exit code 2 or 3
        cause = f" (caused by {type(exc.__cause__).__name__}: {exc.__cause__})" if exc.__cause__ else ""
        msg = f"ERROR {type(exc).__name__}: {exc}{cause}".replace("\n", " ")
        print(msg, file=sys.stderr)
        return _exit_code(exc)
    code = EXIT_ISSUES if print_verdict(summary) else EXIT_OK
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())

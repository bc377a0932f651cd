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

Output: one line a script can parse, last on stdout::

    RESULT rule=VanishingGradient status=IssuesFound first_step=3 fired_steps=3,4 steps_evaluated=10 \
        steps_skipped=0

(one line, wrapped here; ``first_step=none`` when it never fired; ``fired_steps`` is comma-separated,
at most 20 listed), preceded by the details of the first fire. Exit code: 0 no
issue, 1 issues found, 2 error (one line on stderr, ``ERROR ...``).

This module also exports :func:`invoke_rule` (smdebug's
``smdebug.rules.rule_invoker.invoke_rule`` lives here).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from tornasole.rules.invoker import InvokeSummary, invoke_rule

__all__ = ["main", "invoke_rule", "parse_args", "summary_line"]

EXIT_OK, EXIT_ISSUES, EXIT_ERROR = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one ``ERROR ...`` line (the CLI's contract), exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        print(f"ERROR {message} (see --help)", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m tornasole.rules.rule_invoker",
        description="Run a built-in or custom rule over a trial; unknown --options are rule parameters.",
    )
    p.add_argument("--trial-dir", "--trial_dir", dest="trial_dir", required=True)
    p.add_argument("--rule-name", "--rule_name", dest="rule_name", required=True)
    p.add_argument("--rule-file", "--rule_file", dest="rule_file")
    p.add_argument("--other-trials", "--other_trials", dest="other_trials", help='paths separated by ";"')
    p.add_argument("--start-step", "--start_step", dest="start_step", type=int, default=0)
    p.add_argument("--end-step", "--end_step", dest="end_step", type=int)
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
    """The ``RESULT ...`` line (see module docstring)."""
    first = "none" if summary.first_step is None else str(summary.first_step)
    fired = ",".join(str(s) for s in summary.fired_steps[:20]) or "none"
    return (
        f"RESULT rule={summary.rule_name} status={summary.status} first_step={first} fired_steps={fired} "
        f"steps_evaluated={summary.steps_evaluated} steps_skipped={summary.steps_skipped}"
    )


def _build_rule(ns: argparse.Namespace, params: dict[str, str]):
    from tornasole.rules.loader import create_custom_rule
    from tornasole.rules.registry import create_rule, other_trial_paths
    from tornasole.trials import create_trial

    base = create_trial(ns.trial_dir)
    paths, params = other_trial_paths(params)
    if ns.other_trials:
        paths = [p.strip() for p in ns.other_trials.replace(",", ";").split(";") if p.strip()] + paths
    others = [create_trial(p) for p in paths] or None
    if ns.rule_file:
        return create_custom_rule(ns.rule_file, ns.rule_name, base, other_trials=others, **params)
    return create_rule(ns.rule_name, base, other_trials=others, **params)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
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
        summary = invoke_rule(rule, start_step=ns.start_step, end_step=ns.end_step)
    except Exception as exc:  # noqa: BLE001 - the CLI's contract: one line, exit code 2
        cause = f" (caused by {type(exc.__cause__).__name__}: {exc.__cause__})" if exc.__cause__ else ""
        msg = f"ERROR {type(exc).__name__}: {exc}{cause}".replace("\n", " ")
        print(msg, file=sys.stderr)
        return EXIT_ERROR
    if summary.fired:
        print(summary.fired[0].details)
    print(summary_line(summary))
    return EXIT_ISSUES if summary.fired else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())

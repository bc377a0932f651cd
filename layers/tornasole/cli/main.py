"""Entry point of the ``tornasole`` command: parse, dispatch, and turn errors into one line.

Each sub-command lives in its own module and registers itself with
``add_parser(subparsers)``; errors a user can act on (bad input, missing
files, AWS errors) are printed whole on one line as ``tornasole: error: ...``,
never as a traceback (``--debug`` shows it). Exit codes are those of
:mod:`tornasole.cli.errors` (0 ok, 1 issues found where asked, 2 usage or
invalid input, 3 not found). Output cut short by the reader (``| head``) ends
the command quietly.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import sys
from collections.abc import Sequence

from tornasole.cli.errors import EXIT_OK, exit_code_for, hint, one_line

__all__ = ["main", "build_parser"]

# Sub-command modules; each defines add_parser(subparsers).
_COMMANDS = (
    "tornasole.cli.local_cmd",
    "tornasole.cli.jobs_cmd",
    "tornasole.cli.rules_cmd",
    "tornasole.cli.trial_cmd",
    "tornasole.cli.plot_cmd",
    "tornasole.cli.report_cmd",
    "tornasole.cli.demo_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tornasole",
        description="Debugger for ML training jobs: save tensors, evaluate rules, locally or on AWS.",
        epilog="exit codes (every command): 0 ok, 1 issues found (invoke; jobs status --fail-on-issues), "
        "2 usage or invalid input (a bad option or value, an unknown rule or parameter), "
        "3 not found (job, rule of a job, trial, bucket, file) or a wait timed out",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in _COMMANDS:
        importlib.import_module(module).add_parser(sub)
    return parser


def _user_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [
        ValueError,
        OSError,
        LookupError,
        ImportError,
        RuntimeError,
        re.error,  # a --regex that does not compile, wherever it is first used
    ]
    try:
        from botocore.exceptions import BotoCoreError, ClientError

        errors += [BotoCoreError, ClientError]
    except ImportError:  # boto3 is an optional extra
        pass
    from tornasole.exceptions import TornasoleError

    errors.append(TornasoleError)
    return tuple(errors)


def _quiet_broken_pipe() -> int:
    """The reader went away (``| head``): stop writing, say nothing, exit cleanly.

    stdout is pointed at /dev/null so the interpreter's final flush does not
    raise a second BrokenPipeError at exit.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (tests)
        pass
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        return _quiet_broken_pipe()


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the BrokenPipeError handler
        return code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise
    except _user_errors() as exc:
        if args.debug:
            raise
        print(f"tornasole: error: {one_line(exc)}{hint(exc)}", file=sys.stderr)
        return exit_code_for(exc)


if __name__ == "__main__":
    sys.exit(main())

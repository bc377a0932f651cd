"""Entry point of the ``tornasole`` command: parse, dispatch, and turn errors into one line.

Each sub-command lives in its own module and registers itself with
``add_parser(subparsers)``; errors a user can act on (bad input, missing
files, AWS errors) are printed as ``tornasole: error: ...`` with exit code 2,
never as a traceback (``--debug`` shows it).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

__all__ = ["main", "build_parser"]

# Sub-command modules; each defines add_parser(subparsers).
_COMMANDS = (
    "tornasole.cli.local_cmd",
    "tornasole.cli.jobs_cmd",
    "tornasole.cli.rules_cmd",
    "tornasole.cli.trial_cmd",
    "tornasole.cli.plot_cmd",
    "tornasole.cli.demo_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tornasole",
        description="Debugger for ML training jobs: save tensors, evaluate rules, locally or on AWS.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in _COMMANDS:
        importlib.import_module(module).add_parser(sub)
    return parser


def _user_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [ValueError, OSError, LookupError, ImportError, RuntimeError]
    try:
        from botocore.exceptions import BotoCoreError, ClientError

        errors += [BotoCoreError, ClientError]
    except ImportError:  # boto3 is an optional extra
        pass
    from tornasole.exceptions import TornasoleError

    errors.append(TornasoleError)
    return tuple(errors)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except _user_errors() as exc:
        if args.debug:
            raise
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"tornasole: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

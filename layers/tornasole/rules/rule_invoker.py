"""``python -m tornasole.rules.rule_invoker``: smdebug's path to run one rule over a trial from a shell.

Kept because smdebug's users run this module and import ``invoke_rule`` from it
(``smdebug.rules.rule_invoker.invoke_rule``). The command prints for a person at a terminal, so its
code lives in :mod:`tornasole.cli.smdebug_invoker` (usage, output and exit codes are documented
there); the rule loop is :func:`tornasole.rules.invoke_rule`.
"""

from __future__ import annotations

import sys

from tornasole.cli.smdebug_invoker import main, parse_args, result_line, summary_line
from tornasole.rules.step_loop import invoke_rule

__all__ = ["main", "invoke_rule", "parse_args", "result_line", "summary_line"]

if __name__ == "__main__":
    sys.exit(main())

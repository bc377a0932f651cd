"""Importing this module turns the ``smdebug`` -> ``tornasole`` alias on (see :mod:`tornasole.compat.alias`).

``import tornasole.compat.smdebug_alias`` at the top of a script, or run an
unchanged script with ``python -m tornasole.compat.smdebug_alias train.py ARGS...``.
"""

from __future__ import annotations

import runpy
import sys

from tornasole.compat.alias import install_smdebug_alias

install_smdebug_alias()


def main(argv: list[str] | None = None) -> int:
    """Run a script (``path [args...]``) or a module (``-m name [args...]``) with the alias on."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(
            "usage: python -m tornasole.compat.smdebug_alias (SCRIPT | -m MODULE) [ARGS...]", file=sys.stderr
        )
        return 2
    if args[0] == "-m":
        if len(args) < 2:
            print("usage: python -m tornasole.compat.smdebug_alias -m MODULE [ARGS...]", file=sys.stderr)
            return 2
        sys.argv = args[1:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        runpy.run_path(args[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())

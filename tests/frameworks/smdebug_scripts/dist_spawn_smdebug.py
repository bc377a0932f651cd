"""Starts both ranks of ``dist_train_smdebug.py`` with ``multiprocessing``'s spawn start method, as smdebug's
own distributed tests do. The alias is on in this process only (``TORNASOLE_SMDEBUG_ALIAS=1`` and
``import tornasole``): each spawned child imports ``dist_train_smdebug``, whose ``import smdebug.pytorch``
must find the alias there too.

Usage: TORNASOLE_SMDEBUG_ALIAS=1 python dist_spawn_smdebug.py OUT_DIR PORT INCLUDE_WORKERS
"""

import sys

if __name__ == "__main__":
    import multiprocessing

    import tornasole  # noqa: F401  (turns the alias on here, through the environment variable)

    # isort: split
    from dist_train_smdebug import main_then_exit  # its "import smdebug.pytorch" needs the alias on

    out, port, include = sys.argv[1:4]
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=main_then_exit, args=(out, rank, 2, int(port), include)) for rank in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    sys.exit(max(p.exitcode for p in procs))

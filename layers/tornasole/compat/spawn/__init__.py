"""A directory put on ``sys.path`` while the smdebug alias is on, so processes that ``multiprocessing``
spawns get the alias too (see :mod:`tornasole.compat.spawn.smdebug`)."""

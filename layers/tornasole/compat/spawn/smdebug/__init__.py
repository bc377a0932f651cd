"""The ``smdebug`` a spawned child process finds first: it turns the alias on, then is the alias's module.

Why: ``multiprocessing`` with the ``spawn`` (or ``forkserver``) start method, as
``torch.multiprocessing`` and smdebug's own distributed tests use, starts a fresh
interpreter that imports the target's module, with the parent's ``sys.path``
but not its ``sys.meta_path``. A module doing ``import smdebug.pytorch`` would
fail there although the parent had the alias on. While the alias is on,
:func:`tornasole.compat.alias.install_smdebug_alias` appends this package's
parent directory to ``sys.path``; the child's first ``import smdebug`` runs this
file, which forgets itself, turns the alias on and leaves the alias's
``smdebug`` in ``sys.modules`` (what the import statement then returns).
Nothing else imports it: outside such a child this directory is not on the path.
"""

import importlib
import sys

del sys.modules[__name__]
from tornasole.compat.alias import install_smdebug_alias  # noqa: E402

install_smdebug_alias()
sys.modules[__name__] = importlib.import_module(__name__)

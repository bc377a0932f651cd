"""Oracle tier: smdebug 1.0.34 (in ``.venv-smdebug``) checks what we write, and we check what it writes.

Every test collected under this directory is marked ``oracle`` (``make test-fast``
deselects them) and depends on the session fixture ``smdebug_version``, which
imports ``smdebug.trials`` in the peer venv once and FAILS (never skips) with
the command to run when the venv is missing or broken: an oracle that silently
goes away would let format drift through.

Helpers for test modules (this directory is on ``sys.path``, no package)::

    from smdebug_runner import run_smdebug, run_smdebug_script
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from smdebug_runner import SETUP_HINT, SmdebugRunError, check_smdebug_venv, use_fork_server

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.oracle)


@pytest.fixture(scope="session", autouse=True)
def smdebug_version() -> str:
    """smdebug's version string from the peer venv; fails the session's oracle tests loudly if unusable."""
    problem = None
    try:
        version = check_smdebug_venv()
    except SmdebugRunError as exc:
        problem = str(exc)
    if problem is not None:
        pytest.fail(f"smdebug oracle venv unusable: {SETUP_HINT}\n{problem}", pytrace=False)
    if version != "1.0.34":
        pytest.fail(f"the oracle must be smdebug 1.0.34, found {version}: {SETUP_HINT}", pytrace=False)
    return version


@pytest.fixture(scope="session", autouse=True)
def smdebug_fork_server(smdebug_version: str) -> Iterator[None]:
    """The oracle's smdebug children fork from one warm interpreter (saves a 2-5 s import per call)."""
    use_fork_server(True)
    yield
    use_fork_server(False)

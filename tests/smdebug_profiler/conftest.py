"""The outside check of issue #31: smdebug's profiler tests (``tests/profiler/core``), as our own checks.

Each module here makes the checks one of smdebug's test modules makes (the readers, the system-file
parser, the file-name utilities, the pandas frames), written afresh, through smdebug's import names
with the ``smdebug`` alias on, against the smdebug-written fixture ``tests/fixtures/profiler/
profiler_pt_2nodes`` and system files in SageMaker's shape written here. The alias is process wide:
it is on for one module at a time and off again after it (``smdebug`` below).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "profiler"))

MODULES = {
    "system_metrics_reader": "smdebug.profiler.system_metrics_reader",
    "algorithm_metrics_reader": "smdebug.profiler.algorithm_metrics_reader",
    "system_profiler_file_parser": "smdebug.profiler.system_profiler_file_parser",
    "utils": "smdebug.profiler.utils",
    "profiler_constants": "smdebug.profiler.profiler_constants",
    "exceptions": "smdebug.exceptions",
    "profiler_trial": "smdebug.trials.profiler_trial",
}


@pytest.fixture(scope="module")
def smdebug() -> Iterator[SimpleNamespace]:
    """smdebug's profiler modules, imported by their smdebug names with the alias on."""
    from tornasole.compat.alias import alias_installed, install_smdebug_alias, uninstall_smdebug_alias

    was_on = alias_installed()
    install_smdebug_alias()
    try:
        yield SimpleNamespace(**{key: importlib.import_module(name) for key, name in MODULES.items()})
    finally:
        if not was_on:
            uninstall_smdebug_alias()

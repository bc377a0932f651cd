"""Importing tornasole (and its framework-free parts) must never import a framework.

Checked in a fresh interpreter: the test process itself has TensorFlow loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys

_FRAMEWORKS = ("tensorflow", "keras", "xgboost", "torch", "jax")


def _loaded_after(code: str) -> list[str]:
    probe = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {_FRAMEWORKS!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_core_imports_pull_in_no_framework():
    code = (
        "import tornasole\n"
        "from tornasole import Hook, SaveConfig, modes, create_trial\n"
        "import tornasole.trials, tornasole.rules, tornasole.hooks\n"
    )
    assert _loaded_after(code) == []


def test_framework_packages_import_only_their_framework():
    assert {m.split(".")[0] for m in _loaded_after("import tornasole.xgboost")} == {"xgboost"}

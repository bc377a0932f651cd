"""The floor plan holds: ``lint-imports`` keeps every contract of ``pyproject.toml`` ``[tool.importlinter]``.

``make lint`` and ``make test`` run the same command; this test names the broken contract inside the
suite too, so a change that makes a lower package import a higher one, or ties two sibling modules in a
circle, fails where its author runs the tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def test_import_contracts_are_kept() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "layers")}
    done = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout, done.stdout


def test_every_top_level_package_has_a_floor() -> None:
    """A new package of tornasole must be placed in the layers contract, or it escapes every rule."""
    import tomllib

    contracts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    placed = {name.strip() for floor in layers for name in floor.split("|")}
    package = REPO_ROOT / "layers" / "tornasole"
    found = {
        f"tornasole.{p.stem if p.suffix == '.py' else p.name}"
        for p in package.iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()
    }
    assert not found - placed, f"packages without a floor in [tool.importlinter]: {sorted(found - placed)}"

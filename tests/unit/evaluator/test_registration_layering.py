"""The evaluator is a lower layer than ``tornasole.jobs``: it never imports it, registration lives in it."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import tornasole.evaluator

EVALUATOR = Path(tornasole.evaluator.__file__).parent


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_no_evaluator_module_imports_tornasole_jobs() -> None:
    offenders = {
        f"{path.relative_to(EVALUATOR)}: {name}"
        for path in sorted(EVALUATOR.rglob("*.py"))
        for name in _imported_modules(path)
        if name == "tornasole.jobs" or name.startswith("tornasole.jobs.")
    }
    assert offenders == set()


def test_importing_every_evaluator_module_loads_no_jobs_module() -> None:
    modules = sorted(
        "tornasole.evaluator." + ".".join(p.relative_to(EVALUATOR).with_suffix("").parts)
        for p in EVALUATOR.rglob("*.py")
        if p.stem != "__init__"
    )
    assert "tornasole.evaluator.registration.job_registry" in modules
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('tornasole.jobs'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(out.stdout) == []


def test_jobs_api_is_a_front_over_the_evaluator_registry() -> None:
    import tornasole.jobs.api as api

    assert "tornasole.evaluator.registration.job_registry" in _imported_modules(Path(api.__file__))
    # the front holds no registration logic of its own: no DynamoDB writes, no validation
    source = Path(api.__file__).read_text(encoding="utf-8")
    for marker in ("transact", "put_args", "Registrar", "parse_params", "get_rule"):
        assert marker not in source

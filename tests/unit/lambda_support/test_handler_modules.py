"""The handlers live in the package; ``functions/*/handler.py`` only re-export them."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from tornasole.lambda_support.handlers import HANDLER_MODULES, handler_module, load_handler
from tornasole.stack_spec import DEFAULT_SPEC

REPO = Path(__file__).resolve().parents[3]


def _import_by_path(path: Path):
    spec = importlib.util.spec_from_file_location(f"asset_{path.parent.name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("fn", DEFAULT_SPEC.functions, ids=lambda f: f.id)
def test_each_function_asset_reexports_the_package_handler(fn) -> None:
    asset = _import_by_path(REPO / fn.asset_dir / "handler.py")
    assert asset.handler is handler_module(fn.asset_dir).handler
    assert load_handler(fn.asset_dir) is asset.handler


@pytest.mark.parametrize("fn", DEFAULT_SPEC.functions, ids=lambda f: f.id)
def test_function_assets_hold_no_logic(fn) -> None:
    # Only a docstring, one import from the package and __all__: everything else belongs in the package.
    tree = ast.parse((REPO / fn.asset_dir / "handler.py").read_text())
    kinds = [type(node).__name__ for node in tree.body]
    assert kinds == ["Expr", "ImportFrom", "Assign"]
    assert tree.body[1].module == HANDLER_MODULES[Path(fn.asset_dir).name]


def test_unknown_asset_names_the_known_ones() -> None:
    known = "on_object_created, publish_events, sagemaker_state_change, scheduled_check"
    with pytest.raises(KeyError, match=rf"'functions/nope'.*{known}"):
        handler_module("functions/nope")


def test_local_mode_never_reaches_outside_the_package() -> None:
    local = REPO / "layers" / "tornasole" / "local"
    for path in local.glob("*.py"):
        text = path.read_text()
        assert "parents[" not in text, path
        assert "functions/" not in text.replace("``functions/*/handler.py``", ""), path

"""A missing torch is said with the way to get the CPU build: pip's Linux torch is gigabytes of CUDA."""

from __future__ import annotations

import sys

import pytest

from tornasole.cli.main import main
from tornasole.extras import MissingExtraError, require


def _block(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    for name in modules:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setitem(sys.modules, name, None)


def test_demo_without_torch_names_the_cpu_wheel(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    _block(monkeypatch, "torch")
    assert main(["demo", "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "run pip install 'tornasole[demo]'" in err
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in err
    assert len(err.strip().splitlines()) == 1


def test_the_hint_is_only_for_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    _block(monkeypatch, "matplotlib")
    with pytest.raises(MissingExtraError) as info:
        require("demo")
    assert "download.pytorch.org" not in str(info.value)

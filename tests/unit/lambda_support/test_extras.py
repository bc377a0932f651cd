"""Extras are named by what a user wants; a missing one is one line with the exact pip command."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from tornasole.cli.main import main
from tornasole.extras import EXTRA_ALIASES, EXTRAS, MissingExtraError, missing_modules, require

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def _block(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make ``modules`` unimportable, as if the extra were not installed."""
    for name in modules:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setitem(sys.modules, name, None)


def test_every_declared_extra_has_a_row_and_back() -> None:
    declared = set(tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"])
    assert declared - {"dev"} == set(EXTRAS) | set(EXTRA_ALIASES)


def test_library_dependencies_are_ranges_not_pins() -> None:
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    assert {d.split(">=")[0] for d in deps} == {"numpy", "protobuf", "google-crc32c"}
    for dep in deps:
        assert "==" not in dep
        assert ">=" in dep
        assert ",<" in dep


def test_installed_extras_pass() -> None:
    for name in EXTRAS:
        assert missing_modules(name) == ()
        require(name)
    require("torch")  # the alias of pytorch


def test_missing_extra_names_the_install_line(monkeypatch: pytest.MonkeyPatch) -> None:
    _block(monkeypatch, "matplotlib")
    with pytest.raises(MissingExtraError) as info:
        require("plot", "plotting")
    assert str(info.value) == (
        "plotting needs the 'plot' extra (missing: matplotlib): run pip install 'tornasole[plot]'"
    )
    assert isinstance(info.value, ImportError)


def test_local_up_without_the_local_extra_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _block(monkeypatch, "moto", "aws_lambda_powertools")
    assert main(["local", "up", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "tornasole: error: the local mode (tornasole local up / demo) needs the 'local' extra "
        "(missing: moto, aws_lambda_powertools): run pip install 'tornasole[local]'\n"
    )


def test_s3_path_without_boto3_names_the_s3_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from tornasole.trials import create_trial

    _block(monkeypatch, "boto3")
    with pytest.raises(MissingExtraError, match=r"run pip install 'tornasole\[s3\]'$"):
        create_trial("s3://some-bucket/run")


def test_plot_without_matplotlib_names_the_plot_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import numpy as np

    from tornasole import Hook, SaveConfig

    run = str(tmp_path / "run")
    with Hook(run, save_config=SaveConfig(save_interval=1), stop_check_interval=None) as hook:
        hook.save_tensor("w", np.ones(2, dtype=np.float32))
    _block(monkeypatch, "matplotlib")
    assert main(["plot", str(tmp_path / "run"), "--tensor", "w", "-o", str(tmp_path / "p.png")]) == 2
    assert capsys.readouterr().err.endswith("run pip install 'tornasole[plot]'\n")


def test_demo_without_matplotlib_stops_before_any_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _block(monkeypatch, "matplotlib")
    assert main(["demo", "--output-dir", str(tmp_path / "demo")]) == 2
    assert capsys.readouterr().err == (
        "tornasole: error: tornasole demo needs the 'demo' extra (missing: matplotlib): "
        "run pip install 'tornasole[demo]'\n"
    )
    assert not (tmp_path / "demo").exists()

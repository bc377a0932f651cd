"""A hook configuration file that was named but is missing is said, not silently a run with no hook.

smdebug's ``get_hook(create_if_not_exists=True)`` answers ``None`` without a word when the file is
missing, so a typo in ``SMDEBUG_CONFIG_FILE_PATH`` turned debugging off for a whole training run.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import tornasole.pytorch as ts
from tornasole.hooks import del_hook


@pytest.fixture(autouse=True)
def _no_hook(monkeypatch: pytest.MonkeyPatch):
    for var in ("TORNASOLE_CONFIG_FILE_PATH", "SMDEBUG_CONFIG_FILE_PATH"):
        monkeypatch.delenv(var, raising=False)
    del_hook()
    yield
    del_hook()


@pytest.mark.parametrize("var", ["SMDEBUG_CONFIG_FILE_PATH", "TORNASOLE_CONFIG_FILE_PATH"])
def test_a_named_missing_file_is_a_warning_naming_it_and_what_happens(
    var: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "debughookconfig.json"
    monkeypatch.setenv(var, str(missing))
    with caplog.at_level(logging.WARNING, logger="tornasole"):
        assert ts.get_hook(create_if_not_exists=True) is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, caplog.text
    message = warnings[0].getMessage()
    assert str(missing) in message
    assert f"${var}" in message
    assert "no hook created, so this run saves no tensors" in message


def test_a_named_missing_file_passed_as_argument_is_a_warning_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "nope.json"
    with caplog.at_level(logging.WARNING, logger="tornasole"):
        assert ts.get_hook(json_config_path=str(missing), create_if_not_exists=True) is None
    assert str(missing) in caplog.text


def test_no_file_at_sagemakers_default_path_stays_quiet(caplog: pytest.LogCaptureFixture) -> None:
    """Off SageMaker there is no file, and the same script must run unchanged without a warning."""
    with caplog.at_level(logging.WARNING, logger="tornasole"):
        assert ts.get_hook(create_if_not_exists=True) is None
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_a_named_file_that_exists_makes_the_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "hook.json"
    config.write_text(json.dumps({"LocalPath": str(tmp_path / "out")}))
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(config))
    hook = ts.get_hook(create_if_not_exists=True)
    assert hook is not None
    assert hook.out_dir == str(tmp_path / "out")
    hook.close()

"""The moto version gate: patches on a checked moto, speed off and correctness refused on any other."""

from __future__ import annotations

import logging
import tomllib
from pathlib import Path
from typing import Any

import jsonpath_ng.ext
import pytest
from moto.core.common_models import BaseModel
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler
from moto.sqs.models import SQSBackend

from tornasole import config
from tornasole.local import LocalMode, LocalSettings
from tornasole.local.moto_patches import (
    CHECKED_MOTO,
    CHECKED_SPEED_PATCHES,
    UnsupportedMotoError,
    adjust_moto,
    installed_moto,
    moto_requirement,
    restore_moto,
    versions,
)
from tornasole.local.moto_patches.patch_set import SPEED

ROOT = Path(__file__).resolve().parents[3]
UNCHECKED = "5.99.0"


def _moto_now() -> dict[str, Any]:
    return {
        "correctness: DynamoHandler.call_action": DynamoHandler.__dict__.get("call_action"),
        "correctness: SQSBackend.receive_message": SQSBackend.__dict__.get("receive_message"),
        "speed: Table.query": Table.__dict__.get("query"),
        "speed: transact_write_items": DynamoDBBackend.__dict__.get("transact_write_items"),
        "speed: jsonpath parse": jsonpath_ng.ext.parse,
        "speed: BaseModel.__new__": BaseModel.__dict__.get("__new__"),
    }


def _changed(before: dict[str, Any]) -> set[str]:
    return {name.split(":")[0] for name, value in _moto_now().items() if value is not before[name]}


@pytest.fixture
def unchecked_moto(monkeypatch: pytest.MonkeyPatch) -> str:
    """The installed moto reads as a release the patches were never checked against."""
    monkeypatch.setattr(versions, "installed_moto", lambda: UNCHECKED)
    monkeypatch.setattr(versions, "_logged", set())
    return UNCHECKED


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(config.MOTO_SPEED_PATCHES, raising=False)
    monkeypatch.delenv(config.MOTO_UNCHECKED, raising=False)


def test_the_installed_moto_is_a_checked_one_and_gets_every_patch() -> None:
    # The pinned moto (requirements/dev.txt) must be one the patches were checked against.
    assert installed_moto() in CHECKED_MOTO
    before = _moto_now()
    try:
        applied = adjust_moto()
        changed = _changed(before)
    finally:
        restore_moto()
    assert applied == {p.name for p in SPEED if installed_moto() in CHECKED_SPEED_PATCHES[p.name]}
    assert changed == {"correctness", "speed"}
    assert _changed(before) == set()


def test_on_an_unchecked_moto_the_correctness_patches_refuse_naming_both_versions(
    unchecked_moto: str,
) -> None:
    before = _moto_now()
    with pytest.raises(UnsupportedMotoError) as refused:
        adjust_moto()
    message = str(refused.value)
    assert f"moto {UNCHECKED}" in message
    assert CHECKED_MOTO[0] in message
    assert CHECKED_MOTO[-1] in message
    assert f"pip install '{moto_requirement()}'" in message
    assert config.MOTO_UNCHECKED in message
    assert _changed(before) == set()  # nothing applied


def test_a_release_known_to_fail_is_refused_saying_why(monkeypatch: pytest.MonkeyPatch) -> None:
    (failed, why) = next(iter(versions.FAILED_MOTO.items()))
    monkeypatch.setattr(versions, "installed_moto", lambda: failed)
    with pytest.raises(UnsupportedMotoError, match=f"moto {failed} fails it") as refused:
        versions.check_correctness_patches()
    assert why in str(refused.value)
    assert f"!={failed}" in moto_requirement()


def test_on_an_unchecked_moto_the_speed_patches_are_off_with_one_log_line(
    unchecked_moto: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=versions.__name__):
        assert not versions.speed_patches_enabled()
        assert not versions.speed_patches_enabled()  # said once
    (line,) = [r.getMessage() for r in caplog.records]
    assert UNCHECKED in line
    assert "speed patches" in line
    assert "off" in line


def test_checking_an_unchecked_moto_applies_the_correctness_patches_only(
    unchecked_moto: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(config.MOTO_UNCHECKED, "1")
    before = _moto_now()
    try:
        applied = adjust_moto()
        changed = _changed(before)
    finally:
        restore_moto()
    assert applied == frozenset()
    assert changed == {"correctness"}


@pytest.mark.parametrize("value", ["0", "false", "off", "no"])
def test_the_environment_turns_the_speed_patches_off_on_a_checked_moto(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(config.MOTO_SPEED_PATCHES, value)
    before = _moto_now()
    try:
        applied = adjust_moto()
        changed = _changed(before)
    finally:
        restore_moto()
    assert applied == frozenset()
    assert changed == {"correctness"}


def test_a_speed_patch_is_applied_only_on_the_releases_it_was_checked_against(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = CHECKED_MOTO[0]  # a checked release the in-process transport does not support
    assert old not in CHECKED_SPEED_PATCHES["in_process_transport"]
    monkeypatch.setattr(versions, "installed_moto", lambda: old)
    try:
        applied = adjust_moto()
    finally:
        restore_moto()
    assert applied == {p.name for p in SPEED} - {"in_process_transport"}


def test_the_table_names_every_speed_patch_and_only_checked_releases() -> None:
    assert set(CHECKED_SPEED_PATCHES) == {p.name for p in SPEED}
    for releases in CHECKED_SPEED_PATCHES.values():
        assert set(releases) <= set(CHECKED_MOTO)
    assert list(CHECKED_MOTO) == sorted(CHECKED_MOTO, key=versions._release)
    assert not set(versions.FAILED_MOTO) & set(CHECKED_MOTO)


def test_the_local_extra_allows_exactly_the_checked_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    for extra in ("local", "dev"):
        (moto,) = [r for r in extras[extra] if r.startswith("moto")]
        assert moto == moto_requirement(), extra
    pins = [
        line.split("==")[1].strip()
        for name in ("dev.txt", "demo.txt", "smdebug.txt")
        for line in (ROOT / "requirements" / name).read_text().splitlines()
        if line.startswith("moto[server]==")
    ]
    assert pins
    assert set(pins) <= set(CHECKED_MOTO)


def test_local_mode_refuses_to_start_on_an_unchecked_moto(unchecked_moto: str) -> None:
    before = _moto_now()
    mode = LocalMode(LocalSettings(port=0))
    with pytest.raises(UnsupportedMotoError, match=UNCHECKED):
        mode.start()
    assert mode.endpoint == ""  # no server was started
    assert _changed(before) == set()


def test_local_up_on_an_unchecked_moto_says_so_in_one_line(
    unchecked_moto: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tornasole.cli.main import main

    code = main(["local", "up", "--port", "0"])
    err = capsys.readouterr().err
    assert code != 0
    assert err.startswith("tornasole: error: the local mode needs a moto it was checked against")
    assert f"moto {UNCHECKED}" in err
    assert moto_requirement() in err
    assert "Traceback" not in err

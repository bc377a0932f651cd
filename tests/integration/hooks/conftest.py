"""Hook integration tests: a clean single-worker environment for every test."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _single_worker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "TRAINING_JOB_NAME",
        "TORNASOLE_HOOK_DISABLED",
    ):
        monkeypatch.delenv(var, raising=False)

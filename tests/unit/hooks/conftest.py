"""Hook test helpers: a storage wrapper that records (or fails) writes, and a clean worker environment."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from tornasole.storage.schemes import get_storage


class RecordingStorage:
    """Delegates to a real backend; records every write_atomic path in order; can fail the first N writes."""

    def __init__(self, inner: Any, fail_first: int = 0, fail_if: Callable[[str], bool] | None = None) -> None:
        self.inner = inner
        self.writes: list[str] = []
        self.attempts: list[str] = []
        self.fail_first = fail_first
        self.fail_if = fail_if
        self._lock = threading.Lock()

    def write_atomic(self, path: str, data: bytes) -> None:
        with self._lock:
            self.attempts.append(path)
            if self.fail_first > 0 or (self.fail_if is not None and self.fail_if(path)):
                self.fail_first = max(0, self.fail_first - 1)
                raise OSError(f"injected failure writing {path}")
        self.inner.write_atomic(path, data)
        with self._lock:
            self.writes.append(path)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def recording_storage() -> Callable[..., RecordingStorage]:
    def make(path: str, **kwargs: Any) -> RecordingStorage:
        return RecordingStorage(get_storage(path), **kwargs)

    return make


@pytest.fixture(autouse=True)
def _no_stray_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hooks read launcher variables; a test starts as a single, non-SageMaker worker."""
    for var in (
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "HOROVOD_RANK",
        "HOROVOD_SIZE",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "TRAINING_JOB_NAME",
        "TORNASOLE_HOOK_DISABLED",
        "TORNASOLE_CONFIG_FILE_PATH",
    ):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="module")
def reducer():
    """The fused CPU statistics loop, built: the machines the suite runs on have a C compiler, so its
    absence is a failure, never a skip (imported here lazily: most hook tests need no torch)."""
    from tornasole.pytorch import fused_reductions

    built = fused_reductions.load()
    if built is None:
        pytest.fail("the fused reduction did not build (see the warning logged by fused_reductions.load)")
    return built

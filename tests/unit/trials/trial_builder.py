"""Build small trials with the format writer, and watch what a trial asks of its storage."""

from __future__ import annotations

import threading
from collections.abc import Iterable

import numpy as np

from tornasole.format.writer import TrialWriter
from tornasole.modes import GLOBAL, ModeKeys
from tornasole.storage import LocalStorage

COLLECTIONS = {
    "weights": {
        "name": "weights",
        "include_regex": ["weight"],
        "tensor_names": [],
        "reduction_config": None,
        "save_config": None,
        "save_histogram": True,
    },
    "losses": {
        "name": "losses",
        "include_regex": [],
        "tensor_names": ["loss"],
        "reduction_config": None,
        "save_config": None,
        "save_histogram": False,
    },
}


def tensor_value(step: int, worker: str, name: str) -> np.ndarray:
    """Deterministic, distinct per (step, worker, name)."""
    seed = step * 1000 + int(worker.rsplit("_", 1)[-1]) * 100 + sum(map(ord, name)) % 97
    return np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 + seed


def write_step(
    trial_dir: str,
    step: int,
    worker: str = "worker_0",
    mode: ModeKeys = GLOBAL,
    mode_step: int | None = None,
    names: Iterable[str] = ("dense.weight", "loss"),
    reductions: bool = False,
) -> None:
    tw = TrialWriter(trial_dir, worker=worker)
    sw = tw.step_writer(step, mode=mode, mode_step=mode_step)
    for name in names:
        value = tensor_value(step, worker, name)
        if reductions:
            sw.add_tensor(f"smdebug/reductions/mean/{name}", np.float32(value.mean()))
            sw.add_tensor(f"smdebug/reductions/abs_max/{name}", np.float32(np.abs(value).max()))
        sw.add_tensor(name, value)
    tw.write_step(sw)


def write_collections(trial_dir: str, num_workers: int = 1, worker: str = "worker_0") -> None:
    TrialWriter(trial_dir, worker=worker).write_collections(COLLECTIONS, num_workers=num_workers)


def write_end(trial_dir: str) -> None:
    TrialWriter(trial_dir).write_end_marker()


def make_trial_dir(trial_dir: str, steps: Iterable[int], workers: int = 1, end: bool = True, **kw) -> str:
    for w in range(workers):
        write_collections(trial_dir, num_workers=workers, worker=f"worker_{w}")
        for s in steps:
            write_step(trial_dir, s, worker=f"worker_{w}", **kw)
    if end:
        write_end(trial_dir)
    return trial_dir


class _RecordingViews:
    """``LocalStorage.mapped_files`` that records each path it finds in ``storage.views``."""

    def __init__(self, mapped, storage: RecordingStorage) -> None:
        self._mapped = mapped
        self._storage = storage

    def get(self, path, default=None):
        view = self._mapped.get(path)
        if view is None:
            return default
        with self._storage._lock:
            self._storage.views.append(path)
        return view


class RecordingStorage(LocalStorage):
    """A LocalStorage that records every list / read / read_many call (thread-safe)."""

    def __init__(self) -> None:
        super().__init__()
        self.lists: list[tuple[str, str | None, list[str]]] = []
        self.reads: list[tuple[str, int | None, int | None]] = []
        self.batches: list[int] = []
        self.views: list[str] = []  # event files asked for as mapped views (local trials' value reads)
        self._lock = threading.Lock()

    def list(self, prefix, start_after=None):
        out = list(super().list(prefix, start_after))
        with self._lock:
            self.lists.append((prefix, start_after, out))
        return iter(out)

    def read(self, path, start=None, end=None):
        with self._lock:
            self.reads.append((path, start, end))
        return super().read(path, start, end)

    def view(self, path):
        with self._lock:
            self.views.append(path)
        return super().view(path)

    @property
    def mapped_files(self):
        """The mapped files, recording every hit (a local value read without a ``view`` call)."""
        return _RecordingViews(super().mapped_files, self)

    def read_many(self, requests, on_error="raise"):
        with self._lock:
            self.batches.append(len(requests))
        return super().read_many(requests, on_error)

    def index_lists(self) -> list[tuple[str, str | None, list[str]]]:
        return [c for c in self.lists if c[0].endswith("/index/")]

    def reset(self) -> None:
        with self._lock:
            self.lists.clear()
            self.reads.clear()
            self.batches.clear()
            self.views.clear()

"""Writing a step's TensorBoard summaries as one event file, atomically, through the storage layer."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterable
from typing import Any

import numpy as np

from tornasole.format.tfrecord import frame
from tornasole.modes import ModeKeys
from tornasole.storage.paths import join
from tornasole.tensorboard.summary import histogram_event, scalar_event

__all__ = ["TensorBoardWriter", "tensorboard_file_name"]

logger = logging.getLogger(__name__)


def tensorboard_file_name(mode: ModeKeys, step: int, worker: str | None = None) -> str:
    """``<MODE>/<step:012d>_<worker>.tfevents``, the worker defaulting to ``<pid>_<hostname>`` (smdebug's).

    >>> tensorboard_file_name(ModeKeys.TRAIN, 2, "7_host")
    'TRAIN/000000000002_7_host.tfevents'
    """
    worker = worker or f"{os.getpid()}_{socket.gethostname()}"
    return f"{mode.name}/{int(step):012d}_{worker}.tfevents"


class TensorBoardWriter:
    """Summaries of saved steps under ``tensorboard_dir`` (local or ``s3://``); used from the writer thread.

    ``write_step(mode, step, summaries)`` takes ``("scalar" | "histogram", tag,
    numpy value, wall_time)`` tuples; values TensorBoard cannot show (a scalar
    summary of a non-scalar, a histogram of booleans) are skipped.
    """

    def __init__(self, tensorboard_dir: str, storage: Any, worker: str | None = None) -> None:
        self.tensorboard_dir = str(tensorboard_dir).rstrip("/")
        self.storage = storage
        self.worker = worker
        self.files_written = 0

    def encode(self, step: int, summaries: Iterable[tuple[str, str, Any, float | None]]) -> bytes:
        """The event file's bytes for one step's summaries (TFRecord framing, payload CRCs)."""
        out = bytearray()
        for kind, tag, value, wall_time in summaries:
            arr = np.asarray(value)
            if kind == "scalar":
                if arr.size != 1 or not np.issubdtype(arr.dtype, np.number) or arr.dtype == bool:
                    continue
                payload: bytes | None = scalar_event(tag, float(arr.reshape(-1)[0]), step, wall_time)
            elif kind == "histogram":
                payload = histogram_event(tag, arr, step, wall_time)
            else:
                raise ValueError(f"unknown summary kind {kind!r}")
            if payload is not None:
                out += frame(payload, write_checksum=True)
        return bytes(out)

    def write_step(
        self, mode: ModeKeys, step: int, summaries: Iterable[tuple[str, str, Any, float | None]]
    ) -> str | None:
        """Write the step's file; returns its path (``None`` when there was nothing to write)."""
        data = self.encode(step, summaries)
        if not data:
            return None
        path = join(self.tensorboard_dir, tensorboard_file_name(mode, step, self.worker))
        self.storage.write_atomic(path, data)
        self.files_written += 1
        return path

"""Upload trees to the moto bucket and compare S3 trials with the fixtures' ground truth."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from tornasole.aws.clients import s3_client
from tornasole.format.reductions import parse_reduction_tag
from tornasole.modes import ModeKeys
from tornasole.storage.s3 import S3Storage


def upload_tree(local: Path, bucket: str, prefix: str) -> str:
    """Copy every file under ``local`` to ``s3://bucket/prefix/...``; return the trial URL."""
    client = s3_client()
    for root, _, files in os.walk(local):
        for name in files:
            path = Path(root) / name
            key = f"{prefix}/{path.relative_to(local).as_posix()}"
            client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
    return f"s3://{bucket}/{prefix}"


def expected(fixtures_dir: Path, tree: str) -> tuple[dict[str, np.ndarray], list[dict]]:
    with np.load(fixtures_dir / f"{tree}.expected.npz", allow_pickle=False) as z:
        values = {k: z[k] for k in z.files}
    return values, json.loads((fixtures_dir / f"{tree}.expected.json").read_text())["records"]


def check_value(trial, key: str, want: np.ndarray) -> None:
    worker, step, tag = key.split("|", 2)
    parsed = parse_reduction_tag(tag)
    if parsed is None:
        got = trial.tensor(tag).value(int(step), worker=worker)
    else:
        name, red, is_abs = parsed
        got = trial.tensor(name).reduction_value(int(step), red, worker=worker, abs=is_abs)
    assert got.shape == want.shape, key
    if want.dtype.kind == "U":
        assert [str(x) for x in got.ravel()] == [str(x) for x in want.ravel()], key
        return
    assert got.dtype == want.dtype, key
    assert np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"), key


def check_modes(trial, records: list[dict]) -> None:
    for r in records:
        mode = ModeKeys.from_name(r["index_mode"])
        assert trial.mode(r["step"]) == mode, r["key"]
        assert trial.mode_step(r["step"]) == r["index_mode_step"], r["key"]
        assert trial.global_step(mode, r["index_mode_step"]) == r["step"], r["key"]


class RecordingS3Storage(S3Storage):
    """An S3Storage that records its list calls (and what they returned) and its reads, single or batched."""

    def __init__(self) -> None:
        super().__init__()
        self.lists: list[tuple[str, str | None, list[str]]] = []
        self.reads: list[tuple[str, int | None, int | None]] = []

    def list(self, prefix, start_after=None):
        out = list(super().list(prefix, start_after))
        self.lists.append((prefix, start_after, out))
        return iter(out)

    def read(self, path, start=None, end=None):
        self.reads.append((path, start, end))
        return super().read(path, start, end)

    def read_many(self, requests, on_error="raise"):
        self.reads.extend((r.path, r.start, r.end) for r in requests)
        return super().read_many(requests, on_error)

    def index_lists(self) -> list[tuple[str, str | None, list[str]]]:
        return [c for c in self.lists if c[0].endswith("/index/")]

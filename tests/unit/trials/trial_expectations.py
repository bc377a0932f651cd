"""Compare a trial with a fixture's ground truth (``<tree>.expected.npz`` / ``.expected.json``).

Imported by the local fixture tests; the S3 tests have their own copy of the
few lines they need (test directories are not packages).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tornasole.format.reductions import parse_reduction_tag
from tornasole.modes import ModeKeys


def expected(fixtures_dir: Path, tree: str) -> tuple[dict[str, np.ndarray], list[dict]]:
    with np.load(fixtures_dir / f"{tree}.expected.npz", allow_pickle=False) as z:
        values = {k: z[k] for k in z.files}
    records = json.loads((fixtures_dir / f"{tree}.expected.json").read_text())["records"]
    return values, records


def read_through_trial(trial, key: str) -> np.ndarray:
    """The value for npz key ``worker|step|tag`` through the public API."""
    worker, step, tag = key.split("|", 2)
    parsed = parse_reduction_tag(tag)
    if parsed is None:
        return trial.tensor(tag).value(int(step), worker=worker)
    name, red, is_abs = parsed
    return trial.tensor(name).reduction_value(int(step), red, worker=worker, abs=is_abs)


def assert_same_array(got: np.ndarray, want: np.ndarray, key: str) -> None:
    assert isinstance(got, np.ndarray), key
    if want.dtype.kind == "U":
        assert got.dtype.kind in "UO", (key, got.dtype)
        assert got.shape == want.shape, key
        assert [str(x) for x in got.ravel()] == [str(x) for x in want.ravel()], key
        return
    assert got.dtype == want.dtype, (key, got.dtype, want.dtype)
    assert got.shape == want.shape, (key, got.shape, want.shape)
    assert np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"), key


def check_all_values(trial, values: dict[str, np.ndarray]) -> int:
    for key, want in values.items():
        assert_same_array(read_through_trial(trial, key), want, key)
    return len(values)


def check_modes(trial, records: list[dict]) -> None:
    """Every record's global step maps to the index's mode / mode step, and back."""
    for r in records:
        mode = ModeKeys.from_name(r["index_mode"])
        assert trial.mode(r["step"]) == mode, r["key"]
        assert trial.mode_step(r["step"]) == r["index_mode_step"], r["key"]
        assert trial.global_step(mode, r["index_mode_step"]) == r["step"], r["key"]

"""smdebug 1.0.34's ``create_trial`` reads what OUR writer wrote, value for value.

Why: users keep their smdebug notebooks and rules; a run saved by Tornasole
must open in smdebug exactly as if smdebug had saved it. We build trees with
``tornasole.format.writer`` (every dtype smdebug's reader can decode, 0-d and
n-d shapes, the four modes with mode steps, steps past 1000 so the index
prefix rolls over, two workers, reduction records, shape records, collections
with ``_meta.num_workers``, the end marker), then let smdebug read them in its
own venv and compare: dtype, shape and value of every (tensor, step, worker);
steps per mode; ``mode(step)`` / ``mode_step(step)``; ``global_step(mode,
mode_step)``; workers; saved and computed ``reduction_value``; shapes; the
collections. Also on an ``s3://`` copy served by moto.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from oracle_trees import (
    RELU,
    RELU_SHAPE,
    SCHEDULE,
    SMALL_SCHEDULE,
    WORKERS,
    collections_json,
    read_inputs,
    write_tree,
)
from trial_dump import dump_with_smdebug

from tornasole.modes import EVAL, GLOBAL, TRAIN, ModeKeys


def _read_and_check(path: str, expected: dict[str, Any], s3_endpoint: str | None = None) -> None:
    """smdebug reads ``path`` (the whole API locally; each value once on S3, where reads are slow)."""
    inputs = read_inputs(path, expected, light=s3_endpoint is not None)
    _check(dump_with_smdebug(inputs, s3_endpoint=s3_endpoint), expected, inputs)


def _same(got: np.ndarray, want: np.ndarray, what: str) -> str | None:
    if got.dtype != want.dtype:
        return f"{what}: dtype {got.dtype} != {want.dtype}"
    if got.shape != want.shape:
        return f"{what}: shape {got.shape} != {want.shape}"
    if not np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"):
        return f"{what}: values differ: {got!r} != {want!r}"
    return None


def _check(res, expected: dict[str, Any], inputs: dict[str, Any]) -> None:
    schedule = expected["schedule"]
    d, arrays = res.data, res.arrays
    problems: list[str] = []

    # steps, modes, mode steps, global step mapping
    assert d["steps"] == [s for s, _, _ in schedule]
    assert d["workers"] == list(WORKERS)
    assert d["num_workers"] == len(WORKERS)
    assert d["modes"] == sorted({m.name for _, m, _ in schedule} - {"GLOBAL"})  # smdebug never lists GLOBAL
    for m in ModeKeys:
        want = [s for s, mm, _ in schedule] if m == GLOBAL else [ms for _, mm, ms in schedule if mm == m]
        assert d["steps_by_mode"][m.name] == want, m
    for s, m, ms in schedule:
        assert d["mode_of"][str(s)] == m.name, s
        assert d["mode_step_of"][str(s)] == ms, s
        assert d["global_step"][f"{m.name}|{ms}"] == s, (m, ms)
        assert d["global_step"][f"GLOBAL|{s}"] == s

    # names: every raw tensor, plus the reduction/shape-only tensor; no reduction tags leak as names
    want_names = sorted({name for (name, _s, _w) in expected["values"]} | {RELU})
    assert d["tensor_names"] == want_names

    # per-tensor steps per mode
    for name in want_names:
        present = (
            {s for (n, s, _w) in expected["values"] if n == name}
            if name != RELU
            else {s for s, _, _ in schedule}
        )
        for m in ModeKeys:
            want = (
                sorted(s for s, mm, _ in schedule if s in present)
                if m == GLOBAL
                else sorted(ms for s, mm, ms in schedule if mm == m and s in present)
            )
            if d["tensor_steps"][name][m.name] != want:
                problems.append(f"{name} steps({m.name}): {d['tensor_steps'][name][m.name]} != {want}")

    # every value, by global step and by (mode, mode step)
    modes = {s: (m, ms) for s, m, ms in schedule}
    for (name, s, w), want in expected["values"].items():
        if d["tensor_workers"].get(f"{name}|{s}") != list(WORKERS):
            problems.append(f"{name}@{s}: workers {d['tensor_workers'].get(f'{name}|{s}')}")
        for key in (
            f"value|{name}|{s}|{w}",
            *(
                [f"modevalue|{name}|{modes[s][0].name}|{modes[s][1]}|{w}"]
                if modes[s][0] != GLOBAL and inputs.get("mode_values", True)
                else []
            ),
        ):
            if key in d["errors"]:
                problems.append(f"{key}: smdebug raised {d['errors'][key]}")
            elif key not in arrays:
                problems.append(f"{key}: not read")
            else:
                p = _same(arrays[key], want, key)
                if p:
                    problems.append(p)

    # the reduction-only tensor: value unavailable (never saved raw) is smdebug's documented answer
    for s, _, _ in schedule:
        for w in WORKERS:
            err = d["errors"].get(f"value|{RELU}|{s}|{w}", "")
            if not err.startswith("TensorUnavailableForStep"):
                problems.append(f"{RELU}@{s}/{w}: expected TensorUnavailableForStep, got {err or 'a value'}")
            if d["shapes"].get(f"shape|{RELU}|{s}|{w}") != list(RELU_SHAPE):
                problems.append(
                    f"{RELU}@{s}/{w}: shape {d['shapes'].get(f'shape|{RELU}|{s}|{w}')} "
                    f"{d['errors'].get(f'shape|{RELU}|{s}|{w}', '')}"
                )

    # saved reductions: exactly the record we wrote
    for (name, s, w, red, ab), want in expected["reductions"].items():
        key = f"red|{name}|{s}|{w}|{red}|{ab}"
        if key in d["errors"]:
            problems.append(f"{key}: smdebug raised {d['errors'][key]}")
        else:
            p = _same(arrays[key], want, key)
            if p:
                problems.append(p)
    # computed reductions: smdebug computes them from the raw value it read
    for name, s, w, red, ab in inputs["reductions"]:
        if (name, s, w, red, ab) in expected["reductions"]:
            continue
        key = f"red|{name}|{s}|{w}|{red}|{ab}"
        if key in d["errors"]:
            problems.append(f"{key}: smdebug raised {d['errors'][key]}")
            continue
        raw = expected["values"][(name, s, w)]
        want = getattr(np, {"variance": "var"}.get(red, red))(np.abs(raw) if ab else raw)
        if not np.allclose(np.asarray(arrays[key], dtype=np.float64), want, rtol=1e-3):
            problems.append(f"{key}: {arrays[key]} != {want}")

    # collections: smdebug parsed our file into the same collections
    want_colls = json.loads(json.dumps(collections_json()))
    got_colls = d["collections"]
    if got_colls != want_colls:
        problems.append(f"collections differ:\n smdebug: {got_colls}\n written: {want_colls}")

    unexpected = [
        k
        for k in d["errors"]
        if not k.startswith(f"value|{RELU}|") and not k.startswith(f"modevalue|{RELU}|")
    ]
    assert not problems, f"{len(problems)} disagreements (first 40):\n" + "\n".join(problems[:40])
    assert not unexpected, f"smdebug errors: {[(k, d['errors'][k]) for k in unexpected][:20]}"


def test_smdebug_reads_our_local_tree(tmp_path: Path) -> None:
    root = tmp_path / "trial"
    expected = write_tree(str(root), SCHEDULE)
    assert (root / "index" / "000000001" / "000000001000_worker_1.json").is_file()
    assert (root / "index" / "000000002" / "000000002001_worker_0.json").is_file()
    assert (root / "events" / "000000002001" / "000000002001_worker_1.tfevents").is_file()
    _read_and_check(str(root), expected)


def _upload(root: Path, bucket: str, prefix: str) -> None:
    from tornasole.aws.clients import s3_client

    s3 = s3_client()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            s3.put_object(
                Bucket=bucket, Key=f"{prefix}/{p.relative_to(root).as_posix()}", Body=p.read_bytes()
            )


@pytest.mark.slow
def test_smdebug_reads_our_tree_copied_to_s3(tmp_path: Path, s3_bucket: str, moto_endpoint: str) -> None:
    root = tmp_path / "trial"
    expected = write_tree(str(root), SMALL_SCHEDULE)
    _upload(root, s3_bucket, "jobs/run-1")
    _read_and_check(f"s3://{s3_bucket}/jobs/run-1", expected, s3_endpoint=moto_endpoint)


@pytest.mark.slow
def test_smdebug_reads_a_tree_our_writer_put_on_s3(s3_bucket: str, moto_endpoint: str) -> None:
    """TrialWriter straight to ``s3://`` (our S3 storage's write path), read back by smdebug."""
    schedule = [(0, TRAIN, 0), (1234, EVAL, 0)]
    expected = write_tree(f"s3://{s3_bucket}/direct", schedule)
    _read_and_check(f"s3://{s3_bucket}/direct", expected, s3_endpoint=moto_endpoint)

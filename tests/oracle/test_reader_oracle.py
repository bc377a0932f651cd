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
from smdebug_runner import run_smdebug
from tornasole.modes import EVAL, GLOBAL, PREDICT, TRAIN, ModeKeys

WORKERS = ("worker_0", "worker_1")
# (global step, mode, mode step); GLOBAL's mode step is the global step.
SCHEDULE = [
    (0, GLOBAL, 0),
    (1, TRAIN, 0),
    (2, TRAIN, 1),
    (3, EVAL, 0),
    (4, PREDICT, 0),
    (5, TRAIN, 2),
    (6, EVAL, 1),
    (7, GLOBAL, 7),
    (999, TRAIN, 3),
    (1000, TRAIN, 4),  # index/000000001/
    (1234, EVAL, 2),
    (2001, PREDICT, 1),  # index/000000002/
]
SMALL_SCHEDULE = [(0, GLOBAL, 0), (1, TRAIN, 0), (3, EVAL, 0), (4, PREDICT, 0), (1234, TRAIN, 1)]

GRAD = "gradient/dense.weight"
# saved reduction records of GRAD: (reduction, abs)
GRAD_REDUCTIONS = [("mean", False), ("max", False), ("l2", False), ("mean", True), ("l1", True)]
# a tensor saved only as reductions plus a shape record (save_raw_tensor=False, save_shape=True)
RELU = "relu_output_0"
RELU_SHAPE = (3, 7)
RELU_REDUCTIONS = [("min", False), ("l2", False), ("max", True)]
EVAL_ONLY = "eval/accuracy"


def _np_reduction(x: np.ndarray, red: str, absolute: bool) -> np.ndarray:
    """smdebug's numpy reductions (shape [1], source dtype for min/max/mean/...)."""
    if absolute:
        x = np.abs(x)
    if red in ("l1", "l2"):
        return np.array([np.linalg.norm(x.ravel(), ord=int(red[1]))]).astype(x.dtype)
    fn = {
        "min": np.min,
        "max": np.max,
        "mean": np.mean,
        "std": np.std,
        "variance": np.var,
        "sum": np.sum,
        "prod": np.prod,
    }[red]
    return np.array([fn(x)]).astype(x.dtype)


def raw_tensors(step: int, worker: str, mode: ModeKeys) -> dict[str, np.ndarray]:
    """The raw tensors of one (step, worker): values differ per step and worker so mix-ups show."""
    wi = WORKERS.index(worker)
    k = step * 10 + wi
    rng = np.random.default_rng(k)
    out = {
        "f32_2x2": rng.standard_normal((2, 2)).astype(np.float32),
        "f64_2x3x4": rng.standard_normal((2, 3, 4)),
        "f16_vec": rng.standard_normal(5).astype(np.float16),
        "i32_vec": rng.integers(-(2**31), 2**31 - 1, 6, dtype=np.int32),
        "i64_vec": np.array([1 << 40, -5, k], dtype=np.int64),
        "u8_vec": rng.integers(0, 256, 7, dtype=np.uint8),
        "bool_vec": rng.random(4) > 0.5,
        "c128_vec": rng.standard_normal(3) + 1j * rng.standard_normal(3),
        "str_vec": np.array(["ab", "héllo", f"s{step}w{wi}", "日本"]),
        "f32_0d": np.array(k + 0.5, dtype=np.float32),
        "i64_0d": np.array(-k, dtype=np.int64),
        "bool_0d": np.array(k % 2 == 0),
        "scalar/loss": np.array([k * 0.25]),
        "big/f32_3d": rng.standard_normal((8, 16, 33)).astype(np.float32),
        GRAD: rng.standard_normal((4, 5)).astype(np.float32),
    }
    if mode == EVAL:
        out[EVAL_ONLY] = np.array([0.5 + k / 1e5])
    return out


def relu_value(step: int, worker: str) -> np.ndarray:
    return (
        np.random.default_rng(10_000 + step * 10 + WORKERS.index(worker))
        .standard_normal(RELU_SHAPE)
        .astype(np.float32)
    )


def collections_json() -> dict[str, Any]:
    from tornasole.core.collection import Collection
    from tornasole.core.reduction_config import ReductionConfig
    from tornasole.core.save_config import SaveConfig, SaveConfigMode

    grads = Collection(
        "gradients",
        include_regex=["^gradient"],
        reduction_config=ReductionConfig(
            reductions=["mean", "max"],
            abs_reductions=["mean"],
            norms=["l2"],
            abs_norms=["l1"],
            save_raw_tensor=True,
        ),
        save_config=SaveConfig(save_interval=1),
    )
    grads.add_tensor_name(GRAD)
    relu = Collection(
        "relu_activations",
        include_regex=["relu_output_"],
        reduction_config=ReductionConfig(
            reductions=["min"], norms=["l2"], abs_reductions=["max"], save_shape=True
        ),
        save_config=SaveConfig(
            mode_save_configs={TRAIN: SaveConfigMode(save_interval=1), EVAL: SaveConfigMode(save_interval=1)}
        ),
    )
    relu.add_tensor_name(RELU)
    misc = Collection(
        "misc", include_regex=["_vec$", "^f", "_0d$"], save_config=SaveConfig(save_steps=[0, 1, 2])
    )
    losses = Collection("losses", include_regex=["loss"], save_histogram=False)
    return {c.name: c.to_json_dict() for c in (grads, relu, misc, losses)}


def write_tree(root: str, schedule: list[tuple[int, ModeKeys, int]]) -> dict[str, Any]:
    """Write the tree with our writer; return what a reader must see (JSON-able, arrays separately)."""
    from tornasole.format.reductions import reduction_tag
    from tornasole.format.writer import StepWriter, TrialWriter

    values: dict[tuple[str, int, str], np.ndarray] = {}
    reductions: dict[tuple[str, int, str, str, bool], np.ndarray] = {}
    for worker in WORKERS:
        tw = TrialWriter(root, worker=worker)
        for step, mode, mode_step in schedule:
            sw = StepWriter(step, worker, mode=mode, mode_step=mode_step)
            # hook order: shape record, reductions, raw tensor
            relu = relu_value(step, worker)
            sw.add_shape(RELU, RELU_SHAPE)
            for red, absolute in RELU_REDUCTIONS:
                r = _np_reduction(relu, red, absolute)
                sw.add_tensor(reduction_tag(RELU, red, absolute), r)
                reductions[(RELU, step, worker, red, absolute)] = r
            for name, arr in raw_tensors(step, worker, mode).items():
                if name == GRAD:
                    for red, absolute in GRAD_REDUCTIONS:
                        r = _np_reduction(arr, red, absolute)
                        sw.add_tensor(reduction_tag(GRAD, red, absolute), r)
                        reductions[(GRAD, step, worker, red, absolute)] = r
                sw.add_tensor(name, arr)
                values[(name, step, worker)] = arr
            tw.write_step(sw)
        tw.write_collections(collections_json(), len(WORKERS))
    TrialWriter(root, worker=WORKERS[0]).write_end_marker()
    return {"values": values, "reductions": reductions, "schedule": schedule}


# Runs in .venv-smdebug: read everything through smdebug's public API; errors are recorded, not raised,
# so one disagreement does not hide the others.
_SMDEBUG_DUMP = r"""
import traceback
import numpy as np
from smdebug.trials import create_trial
from smdebug.core.modes import ModeKeys

def attempt(fn):
    try:
        return True, fn()
    except Exception as e:  # noqa
        return False, f"{type(e).__name__}: {e}"

t = create_trial(INPUT["path"])
out = {"errors": {}, "steps": t.steps(), "workers": sorted(t.workers()), "num_workers": t.num_workers,
       "modes": sorted(m.name for m in t.modes()), "tensor_names": sorted(t.tensor_names()),
       "steps_by_mode": {}, "mode_of": {}, "mode_step_of": {}, "global_step": {}, "tensor_steps": {},
       "tensor_workers": {}, "shapes": {}, "reductions": {}, "collections": {}}
for m in ModeKeys:
    out["steps_by_mode"][m.name] = t.steps(mode=m)
    for ms in t.steps(mode=m):
        out["global_step"][f"{m.name}|{ms}"] = t.global_step(m, ms)
for s in t.steps():
    out["mode_of"][str(s)] = t.mode(s).name
    out["mode_step_of"][str(s)] = t.mode_step(s)
for name in sorted(t.tensor_names()):
    tensor = t.tensor(name)
    out["tensor_steps"][name] = {m.name: tensor.steps(mode=m) for m in ModeKeys}
    for s in tensor.steps():
        ws = sorted(tensor.workers(s))
        out["tensor_workers"][f"{name}|{s}"] = ws
        for w in ws:
            ok, v = attempt(lambda: tensor.value(s, worker=w))
            if ok:
                save_array(f"value|{name}|{s}|{w}", v)
            else:
                out["errors"][f"value|{name}|{s}|{w}"] = v
    for m in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT):
        for ms in tensor.steps(mode=m):
            for w in INPUT["workers"]:
                ok, v = attempt(lambda: tensor.value(ms, mode=m, worker=w))
                if ok:
                    save_array(f"modevalue|{name}|{m.name}|{ms}|{w}", v)
                else:
                    out["errors"][f"modevalue|{name}|{m.name}|{ms}|{w}"] = v
for name, s, w, red, ab in INPUT["reductions"]:
    ok, v = attempt(lambda: t.tensor(name).reduction_value(s, red, worker=w, abs=ab))
    if ok:
        save_array(f"red|{name}|{s}|{w}|{red}|{ab}", v)
    else:
        out["errors"][f"red|{name}|{s}|{w}|{red}|{ab}"] = v
for name, s, w in INPUT["shapes"]:
    ok, v = attempt(lambda: list(t.tensor(name).shape(s, worker=w)))
    out["shapes" if ok else "errors"][f"shape|{name}|{s}|{w}"] = v
for cname, c in t.collections().items():
    out["collections"][cname] = c.to_json_dict()
emit(out)
"""


def _reduction_requests(expected: dict[str, Any]) -> list[list[Any]]:
    """Saved reductions (smdebug must fetch the record) and computed ones (from the raw tensor)."""
    req = [[name, s, w, red, ab] for (name, s, w, red, ab) in expected["reductions"]]
    for (name, s, w), arr in expected["values"].items():
        if arr.dtype.kind == "f" and name not in (GRAD,):
            req += [[name, s, w, "variance", False], [name, s, w, "mean", True]]
    return req


def _read_with_smdebug(path: str, expected: dict[str, Any], s3_endpoint: str | None = None):
    shapes = [[RELU, s, w] for (s, _m, _ms) in expected["schedule"] for w in WORKERS]
    return run_smdebug(
        _SMDEBUG_DUMP,
        inputs={
            "path": path,
            "workers": list(WORKERS),
            "reductions": _reduction_requests(expected),
            "shapes": shapes,
        },
        s3_endpoint=s3_endpoint,
        timeout=600,
    )


def _same(got: np.ndarray, want: np.ndarray, what: str) -> str | None:
    if got.dtype != want.dtype:
        return f"{what}: dtype {got.dtype} != {want.dtype}"
    if got.shape != want.shape:
        return f"{what}: shape {got.shape} != {want.shape}"
    if not np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"):
        return f"{what}: values differ: {got!r} != {want!r}"
    return None


def _check(res, expected: dict[str, Any]) -> None:
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
            *([f"modevalue|{name}|{modes[s][0].name}|{modes[s][1]}|{w}"] if modes[s][0] != GLOBAL else []),
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
    for name, s, w, red, ab in _reduction_requests(expected):
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
    _check(_read_with_smdebug(str(root), expected), expected)


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
    _check(_read_with_smdebug(f"s3://{s3_bucket}/jobs/run-1", expected, s3_endpoint=moto_endpoint), expected)


@pytest.mark.slow
def test_smdebug_reads_a_tree_our_writer_put_on_s3(s3_bucket: str, moto_endpoint: str) -> None:
    """TrialWriter straight to ``s3://`` (our S3 storage's write path), read back by smdebug."""
    schedule = [(0, TRAIN, 0), (1234, EVAL, 0)]
    expected = write_tree(f"s3://{s3_bucket}/direct", schedule)
    _check(_read_with_smdebug(f"s3://{s3_bucket}/direct", expected, s3_endpoint=moto_endpoint), expected)


def test_runner_environment_is_clean(moto_endpoint: str) -> None:
    """The oracle must not see our package or real credentials; S3 goes to the endpoint we give it."""
    res = run_smdebug(
        """
        import os, importlib.util, boto3
        c = boto3.client("s3")
        emit({"tornasole": importlib.util.find_spec("tornasole") is not None,
              "key": os.environ.get("AWS_ACCESS_KEY_ID"), "pythonpath": os.environ.get("PYTHONPATH"),
              "endpoint": c.meta.endpoint_url})
        """,
        s3_endpoint=moto_endpoint,
    )
    assert res.data == {"tornasole": False, "key": "testing", "pythonpath": None, "endpoint": moto_endpoint}

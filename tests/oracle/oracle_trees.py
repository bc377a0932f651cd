"""The tree the oracle tests write with OUR writer, and what any reader must see in it.

Why a module of its own: the same tree feeds ``test_reader_oracle.py`` (smdebug
reads it) and ``test_reader_differential.py`` (smdebug and our reader read it and
must agree). Values differ per step and per worker so that mixing them up shows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tornasole.modes import EVAL, GLOBAL, PREDICT, TRAIN, ModeKeys

__all__ = [
    "EVAL_ONLY",
    "GRAD",
    "RELU",
    "RELU_SHAPE",
    "SCHEDULE",
    "SMALL_SCHEDULE",
    "WORKERS",
    "collections_json",
    "read_inputs",
    "reduction_requests",
    "write_tree",
]

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


def raw_tensors(step: int, wi: int, mode: ModeKeys) -> dict[str, np.ndarray]:
    """The raw tensors of one (step, worker number): values differ per step and worker so mix-ups show."""
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


def relu_value(step: int, wi: int) -> np.ndarray:
    return np.random.default_rng(10_000 + step * 10 + wi).standard_normal(RELU_SHAPE).astype(np.float32)


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


def write_tree(
    root: str,
    schedule: list[tuple[int, ModeKeys, int]],
    *,
    missing: frozenset[tuple[int, str]] = frozenset(),
    end_marker: bool = True,
    workers: tuple[str, ...] = WORKERS,
) -> dict[str, Any]:
    """Write the tree with our writer; return what a reader must see (JSON-able, arrays separately).

    ``missing``: (step, worker) pairs not written (a worker still behind, or one that died);
    ``end_marker=False`` leaves the trial live; ``workers``: the writers' names (TF device
    names such as ``/job:worker/replica:0/task:1/device:GPU:0`` are escaped in file names).
    """
    from tornasole.format.reductions import reduction_tag
    from tornasole.format.writer import StepWriter, TrialWriter

    values: dict[tuple[str, int, str], np.ndarray] = {}
    reductions: dict[tuple[str, int, str, str, bool], np.ndarray] = {}
    for wi, worker in enumerate(workers):
        tw = TrialWriter(root, worker=worker)
        for step, mode, mode_step in schedule:
            if (step, worker) in missing:
                continue
            sw = StepWriter(step, worker, mode=mode, mode_step=mode_step)
            # hook order: shape record, reductions, raw tensor
            relu = relu_value(step, wi)
            sw.add_shape(RELU, RELU_SHAPE)
            for red, absolute in RELU_REDUCTIONS:
                r = _np_reduction(relu, red, absolute)
                sw.add_tensor(reduction_tag(RELU, red, absolute), r)
                reductions[(RELU, step, worker, red, absolute)] = r
            for name, arr in raw_tensors(step, wi, mode).items():
                if name == GRAD:
                    for red, absolute in GRAD_REDUCTIONS:
                        r = _np_reduction(arr, red, absolute)
                        sw.add_tensor(reduction_tag(GRAD, red, absolute), r)
                        reductions[(GRAD, step, worker, red, absolute)] = r
                sw.add_tensor(name, arr)
                values[(name, step, worker)] = arr
            tw.write_step(sw)
        tw.write_collections(collections_json(), len(workers))
    if end_marker:
        TrialWriter(root, worker=workers[0]).write_end_marker()
    return {"values": values, "reductions": reductions, "schedule": schedule, "workers": list(workers)}


def reduction_requests(expected: dict[str, Any]) -> list[list[Any]]:
    """Saved reductions (smdebug must fetch the record) and computed ones (from the raw tensor)."""
    req = [[name, s, w, red, ab] for (name, s, w, red, ab) in expected["reductions"]]
    for (name, s, w), arr in expected["values"].items():
        if arr.dtype.kind == "f" and name not in (GRAD,):
            req += [[name, s, w, "variance", False], [name, s, w, "mean", True]]
    return req


def read_inputs(path: str, expected: dict[str, Any], light: bool = False) -> dict[str, Any]:
    """The trial_dump inputs for a tree made by :func:`write_tree`.

    ``light``: every value once, the saved reductions and shapes, nothing else (for S3,
    where smdebug spends ~70 ms per read listing the whole ``events/`` prefix).
    """
    shapes = [[RELU, s, w] for (s, _m, _ms) in expected["schedule"] for w in expected["workers"]]
    if light:
        return {
            "path": path,
            "workers": list(expected["workers"]),
            "reductions": [[n, s, w, r, a] for (n, s, w, r, a) in expected["reductions"]],
            "shapes": shapes,
            "mode_values": False,
        }
    return {
        "path": path,
        "workers": list(expected["workers"]),
        "reductions": reduction_requests(expected),
        "shapes": shapes,
        "reduction_values": sorted({(n, st, w) for (n, st, w, _r, _a) in expected["reductions"]}),
        "probe_steps": {
            "GLOBAL": [0, 8, 500, 1001, 2001, 2002, 10**6],
            "TRAIN": [0, 4, 5, 100],
            "EVAL": [2, 3],
            "PREDICT": [1, 2],
        },
    }

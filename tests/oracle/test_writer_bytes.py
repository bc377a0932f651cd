"""Our writer's output is byte-identical to smdebug 1.0.34's for the same records.

Why bytes and not just "smdebug can read it": users mix files from both
writers in one trial and tools diff runs; FORMAT.md promises identity apart
from wall_time. Here wall_time is fixed on both sides (smdebug's ``time.time``
is patched in its process, ours is passed as ``wall_time=``), so every event
file, index file and collections file must match byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from smdebug_runner import run_smdebug

from tornasole.modes import ModeKeys

WALL = 1_700_000_000.123456

# --- the records: one spec, replayed by smdebug's FileWriter and by ours ---


def _arrays() -> dict[str, np.ndarray]:
    """Every dtype smdebug's writer accepts (its reader is narrower: see test_reader_oracle), many shapes."""
    rng = np.random.default_rng(7)
    return {
        "f32_2x2": np.float32([[1.5, -2.0], [3.25, 0.0]]),
        "f32_0d": np.array(3.5, dtype=np.float32),
        "f32_1": np.array([0.25], dtype=np.float32),
        "f32_big": rng.standard_normal((7, 11, 13)).astype(np.float32),
        "f64_2x3x4": np.arange(24, dtype=np.float64).reshape(2, 3, 4),
        "f64_0d": np.array(-1e300),
        "f16_vec": np.float16([0.5, 1.0, -1.0, 65504]),
        "i8_vec": np.int8([-1, 2, -128, 127]),
        "i16_vec": np.int16([-1, 300]),
        "i32_vec": np.int32([1, -2, 3, 2**31 - 1]),
        "i64_vec": np.int64([1 << 40, -5]),
        "i64_0d": np.array(-7, dtype=np.int64),
        "u8_vec": np.uint8([0, 255, 7]),
        "u16_vec": np.uint16([0, 65535]),
        "u32_vec": np.uint32([0, 2**32 - 1]),
        "u64_vec": np.uint64([0, 2**64 - 1]),
        "bool_vec": np.array([True, False, True]),
        "bool_2x2": np.array([[True, False], [False, True]]),
        "c64_vec": np.complex64([1 + 2j, -3j]),
        "c128_vec": np.complex128([1 + 2j, -0.5 - 3j]),
        "str_vec": np.array(["ab", "héllo", "", "日本"]),
        "nan_inf": np.float32([np.nan, np.inf, -np.inf, -0.0]),
    }


def _tag_for(key: str) -> str:
    return {"f32_2x2": "gradient/dense.weight", "f64_0d": "smdebug/reductions/abs_l2/relu_output_0"}.get(
        key, key
    )


# (global step, worker, mode name or None for the writer default, mode_step or None, extra)
STEPS: list[dict] = [
    {
        "step": 0,
        "worker": "worker_0",
        "mode": None,
        "mode_step": None,
    },  # GLOBAL, mode_step := step, step field 0
    {"step": 1, "worker": "worker_0", "mode": "TRAIN", "mode_step": 0},
    {"step": 7, "worker": "worker_1", "mode": "EVAL", "mode_step": 3},
    {"step": 8, "worker": "worker_0", "mode": "PREDICT", "mode_step": 2},
    {"step": 1234, "worker": "worker_0", "mode": "TRAIN", "mode_step": 1000},  # index prefix 000000001
    {"step": 123456789012, "worker": "worker_10", "mode": "GLOBAL", "mode_step": 123456789012},
]


def _ops(step_spec: dict, arrays: dict[str, np.ndarray]) -> list[dict]:
    """The write calls of one step: every array, reductions, and shape records (index only)."""
    ops: list[dict] = []
    keys = list(arrays)
    for key in keys:
        ops.append({"kind": "tensor", "tag": _tag_for(key), "key": key})
    ops.append({"kind": "shape", "tag": "gradient/dense.weight", "shape": [2, 2]})
    ops.append({"kind": "shape", "tag": "relu_output_0", "shape": []})
    ops.append({"kind": "shape", "tag": "conv/out", "shape": [3, 1, 224, 224]})
    return ops


_SMDEBUG_WRITE = r"""
import time
WALL = INPUT["wall_time"]
time.time = lambda: WALL          # the only thing that differs between two writes of the same records
import numpy as np
from smdebug.core.modes import ModeKeys
from smdebug.core.writer import FileWriter

arrays = np.load(INPUT["arrays"], allow_pickle=False)
for st in INPUT["steps"]:
    w = FileWriter(trial_dir=INPUT["out"], step=st["step"], worker=st["worker"])
    mode = ModeKeys[st["mode"]] if st["mode"] else ModeKeys.GLOBAL
    for op in st["ops"]:
        if op["kind"] == "tensor":
            w.write_tensor(arrays[op["key"]], op["tag"], mode=mode, mode_step=st["mode_step"])
        else:
            w.write_shape(op["tag"], tuple(op["shape"]), mode=mode, mode_step=st["mode_step"])
    w.close()
emit({"ok": True})
"""


def _write_with_smdebug(out: Path, steps: list[dict], arrays: dict[str, np.ndarray], tmp: Path) -> None:
    npz = tmp / "arrays.npz"
    np.savez(npz, **arrays)
    res = run_smdebug(
        _SMDEBUG_WRITE,
        inputs={"wall_time": WALL, "arrays": str(npz), "out": str(out), "steps": steps},
    )
    assert res.data == {"ok": True}


def _write_with_ours(out: Path, steps: list[dict], arrays: dict[str, np.ndarray]) -> None:
    from tornasole.format.writer import StepWriter, TrialWriter

    for st in steps:
        tw = TrialWriter(str(out), worker=st["worker"])
        kwargs = {}
        if st["mode"]:
            kwargs = {"mode": ModeKeys[st["mode"]], "mode_step": st["mode_step"]}
        sw = StepWriter(st["step"], st["worker"], **kwargs)
        for op in st["ops"]:
            if op["kind"] == "tensor":
                sw.add_tensor(op["tag"], arrays[op["key"]], wall_time=WALL)
            else:
                sw.add_shape(op["tag"], tuple(op["shape"]))
        tw.write_step(sw)


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _first_difference(a: bytes, b: bytes) -> str:
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"sizes {len(a)} vs {len(b)}, first difference at byte {n}: {a[n : n + 24]!r} vs {b[n : n + 24]!r}"


def _assert_same_tree(theirs: Path, ours: Path) -> None:
    t, o = _tree(theirs), _tree(ours)
    assert sorted(o) == sorted(t), (
        f"file sets differ:\n only smdebug: {sorted(set(t) - set(o))}\n only ours: {sorted(set(o) - set(t))}"
    )
    bad = {name: _first_difference(t[name], o[name]) for name in t if t[name] != o[name]}
    assert not bad, "files differ (smdebug vs ours):\n" + "\n".join(f"  {k}: {v}" for k, v in bad.items())


def test_event_and_index_files_are_byte_identical(tmp_path: Path) -> None:
    arrays = _arrays()
    steps = [dict(st, ops=_ops(st, arrays)) for st in STEPS]
    _write_with_smdebug(tmp_path / "smdebug", steps, arrays, tmp_path)
    _write_with_ours(tmp_path / "ours", steps, arrays)
    tree = _tree(tmp_path / "smdebug")
    # the comparison is only meaningful if smdebug wrote what we think it wrote
    assert "index/000000001/000000001234_worker_0.json" in tree
    assert "events/123456789012/123456789012_worker_10.tfevents" in tree
    assert "index/123456789/123456789012_worker_10.json" in tree
    _assert_same_tree(tmp_path / "smdebug", tmp_path / "ours")


@pytest.mark.parametrize(
    ("name", "ops"),
    [
        ("single_0d", [{"kind": "tensor", "tag": "CrossEntropyLoss_output_0", "key": "f32_0d"}]),
        (
            "shape_then_tensor",
            [
                {"kind": "shape", "tag": "w", "shape": [2, 2]},
                {"kind": "tensor", "tag": "w_mean", "key": "f32_1"},
            ],
        ),
        (
            "duplicate_names",
            [
                {"kind": "tensor", "tag": "scalar/lr", "key": "f32_1"},
                {"kind": "tensor", "tag": "scalar/lr", "key": "f64_0d"},
            ],
        ),
    ],
)
def test_small_steps_are_byte_identical(tmp_path: Path, name: str, ops: list[dict]) -> None:
    arrays = _arrays()
    steps = [{"step": 5, "worker": "worker_0", "mode": "TRAIN", "mode_step": 5, "ops": ops}]
    _write_with_smdebug(tmp_path / "smdebug", steps, arrays, tmp_path)
    _write_with_ours(tmp_path / "ours", steps, arrays)
    _assert_same_tree(tmp_path / "smdebug", tmp_path / "ours")


# Python / numpy-scalar values as a hook's save_scalar or save_tensor passes them (JSON-encoded for the child)
PY_VALUES = [
    {"tag": "scalar/lr", "py": 0.1},
    {"tag": "scalar/epoch", "py": 3},
    {"tag": "scalar/flag", "py": True},
    {"tag": "scalar/name", "py": "héllo"},
    {"tag": "np_f32", "np": "float32", "v": 2.5},
    {"tag": "np_i64", "np": "int64", "v": -9},
    {"tag": "list_f", "py": [1.0, 2.5, -3.0]},
    {"tag": "list_i", "py": [[1, 2], [3, 4]]},
    {"tag": "tuple_i", "tuple": [5, 6, 7]},
]

_SMDEBUG_PY_VALUES = r"""
import time
WALL = INPUT["wall_time"]
time.time = lambda: WALL
import numpy as np
from smdebug.core.modes import ModeKeys
from smdebug.core.writer import FileWriter

def build(spec):
    if "np" in spec:
        return getattr(np, spec["np"])(spec["v"])
    if "tuple" in spec:
        return tuple(spec["tuple"])
    return spec["py"]

w = FileWriter(trial_dir=INPUT["out"], step=11, worker="worker_0")
for spec in INPUT["values"]:
    w.write_tensor(build(spec), spec["tag"], mode=ModeKeys.TRAIN, mode_step=4)
w.close()
emit({"ok": True})
"""


def _build_py_value(spec: dict):
    if "np" in spec:
        return getattr(np, spec["np"])(spec["v"])
    if "tuple" in spec:
        return tuple(spec["tuple"])
    return spec["py"]


def test_python_scalars_and_lists_are_byte_identical(tmp_path: Path) -> None:
    """Scalars become shape [1] (smdebug's ``make_numpy_array``), lists and tuples become arrays."""
    from tornasole.format.writer import StepWriter, TrialWriter

    res = run_smdebug(
        _SMDEBUG_PY_VALUES, inputs={"wall_time": WALL, "out": str(tmp_path / "smdebug"), "values": PY_VALUES}
    )
    assert res.data == {"ok": True}
    sw = StepWriter(11, "worker_0", mode=ModeKeys.TRAIN, mode_step=4)
    for spec in PY_VALUES:
        sw.add_tensor(spec["tag"], _build_py_value(spec), wall_time=WALL)
    TrialWriter(str(tmp_path / "ours"), worker="worker_0").write_step(sw)
    _assert_same_tree(tmp_path / "smdebug", tmp_path / "ours")


def test_shape_only_step_index_is_byte_identical(tmp_path: Path) -> None:
    """A step with shape records and no tensor (save_shape without raw tensors or reductions).

    smdebug then writes an index whose meta has no ``event_file_name`` and no event file at all.
    """
    arrays = _arrays()
    ops = [{"kind": "shape", "tag": "relu_output_0", "shape": [4, 8]}]
    steps = [{"step": 3, "worker": "worker_0", "mode": "EVAL", "mode_step": 1, "ops": ops}]
    _write_with_smdebug(tmp_path / "smdebug", steps, arrays, tmp_path)
    theirs = _tree(tmp_path / "smdebug")
    assert list(theirs) == ["index/000000000/000000000003_worker_0.json"], list(theirs)
    _write_with_ours(tmp_path / "ours", steps, arrays)
    _assert_same_tree(tmp_path / "smdebug", tmp_path / "ours")


# --- collections ---

# One declarative list, built with smdebug's classes in its venv and with ours here (same constructor names).
COLLECTIONS = [
    {
        "name": "gradients",
        "include_regex": ["^gradient"],
        "tensor_names": ["gradient/dense.weight"],
        "reduction": {
            "reductions": ["mean", "max"],
            "abs_reductions": ["mean"],
            "norms": ["l2"],
            "save_raw_tensor": True,
        },
        "save": {"save_interval": 1},
    },
    {"name": "misc", "include_regex": ["_vec$", "^f"], "save": {"save_steps": [0, 1, 2]}},
    {
        "name": "weights",
        "include_regex": ["^(?!gradient).*weight"],
        "tensor_names": ["b.weight", "a.weight"],
        "reduction": {
            "reductions": ["min", "max", "mean", "std", "variance", "sum", "prod"],
            "abs_reductions": ["min", "max", "mean", "std", "variance", "sum", "prod"],
            "norms": ["l1", "l2"],
            "abs_norms": ["l1", "l2"],
            "save_shape": True,
        },
        "modes": {
            "TRAIN": {"save_interval": 5},
            "EVAL": {"save_interval": 2, "start_step": 3, "end_step": 40},
        },
    },
    {
        "name": "losses",
        "include_regex": ["[Ll]oss_(?!input).*output"],
        "save_histogram": False,
        "save": {"save_interval": 10, "start_step": 5, "end_step": 100},
    },
    {"name": "empty"},
    {
        "name": "relu_activations",
        "include_regex": ["relu_output_"],
        "reduction": {"norms": ["l2"], "save_raw_tensor": False},
    },
]

_SMDEBUG_COLLECTIONS = r"""
from smdebug.core.collection import Collection
from smdebug.core.collection_manager import CollectionManager
from smdebug.core.modes import ModeKeys
from smdebug.core.reduction_config import ReductionConfig
from smdebug.core.save_config import SaveConfig, SaveConfigMode

cm = CollectionManager()
for spec in INPUT["collections"]:
    kw = {}
    if "include_regex" in spec:
        kw["include_regex"] = spec["include_regex"]
    if "reduction" in spec:
        kw["reduction_config"] = ReductionConfig(**spec["reduction"])
    if "save" in spec:
        kw["save_config"] = SaveConfig(**spec["save"])
    if "modes" in spec:
        kw["save_config"] = SaveConfig(
            mode_save_configs={ModeKeys[m]: SaveConfigMode(**v) for m, v in spec["modes"].items()})
    if "save_histogram" in spec:
        kw["save_histogram"] = spec["save_histogram"]
    c = Collection(spec["name"], **kw)
    for t in spec.get("tensor_names", []):
        c.add_tensor_name(t)
    cm.add(c)
cm.set_num_workers(INPUT["num_workers"])
cm.export(INPUT["out"], "worker_0_collections.json")
emit({"ok": True})
"""


def _our_collections() -> dict:
    from tornasole.core.collection import Collection
    from tornasole.core.reduction_config import ReductionConfig
    from tornasole.core.save_config import SaveConfig, SaveConfigMode

    out = {}
    for spec in COLLECTIONS:
        kw: dict = {}
        if "include_regex" in spec:
            kw["include_regex"] = spec["include_regex"]
        if "reduction" in spec:
            kw["reduction_config"] = ReductionConfig(**spec["reduction"])
        if "save" in spec:
            kw["save_config"] = SaveConfig(**spec["save"])
        if "modes" in spec:
            kw["save_config"] = SaveConfig(
                mode_save_configs={ModeKeys[m]: SaveConfigMode(**v) for m, v in spec["modes"].items()}
            )
        if "save_histogram" in spec:
            kw["save_histogram"] = spec["save_histogram"]
        c = Collection(spec["name"], **kw)
        for t in spec.get("tensor_names", []):
            c.add_tensor_name(t)
        out[c.name] = c
    return out


@pytest.mark.parametrize("num_workers", [1, 2])
def test_collections_file_is_byte_identical(tmp_path: Path, num_workers: int) -> None:
    from tornasole.format.writer import TrialWriter

    res = run_smdebug(
        _SMDEBUG_COLLECTIONS,
        inputs={"collections": COLLECTIONS, "num_workers": num_workers, "out": str(tmp_path / "smdebug")},
    )
    assert res.data == {"ok": True}
    colls = _our_collections()
    TrialWriter(str(tmp_path / "ours"), worker="worker_0").write_collections(
        {name: c.to_json_dict() for name, c in colls.items()}, num_workers
    )
    theirs = _tree(tmp_path / "smdebug")
    assert list(theirs) == ["collections/000000000/worker_0_collections.json"]
    assert json.loads(theirs["collections/000000000/worker_0_collections.json"])["_meta"] == {
        "num_workers": num_workers
    }
    _assert_same_tree(tmp_path / "smdebug", tmp_path / "ours")

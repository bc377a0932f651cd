"""The config classes' JSON strings are smdebug 1.0.34's, both ways.

One builder (below, as source text) is executed twice: in the smdebug venv
with smdebug's classes and here with Tornasole's. For every spec the
``to_json()`` strings must be identical, smdebug's ``from_json`` must read our
string back to the same string, and our ``from_json`` must read smdebug's
string into an object equal to ours. ``CollectionManager.export`` files are
compared byte for byte the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

from smdebug_runner import run_smdebug

from tornasole import modes
from tornasole.core import Collection, CollectionManager, ReductionConfig, SaveConfig, SaveConfigMode

# Runs unchanged against either library: only names passed in are used.
BUILDER = """
def build(spec, SaveConfig, SaveConfigMode, ReductionConfig, Collection, modes):
    def save_config(sc):
        if sc is None:
            return None
        if "modes" in sc:
            return SaveConfig({getattr(modes, k): (SaveConfigMode(**v) if v is not None else None)
                               for k, v in sc["modes"].items()})
        return SaveConfig(**sc["common"])

    kind = spec["kind"]
    if kind == "save_config":
        return save_config(spec["save_config"])
    if kind == "reduction":
        return ReductionConfig(**spec["args"])
    if kind == "collection":
        rc = spec.get("reduction")
        return Collection(spec["name"], include_regex=spec.get("include_regex"),
                          tensor_names=spec.get("tensor_names"),
                          reduction_config=ReductionConfig(**rc) if rc is not None else None,
                          save_config=save_config(spec.get("save_config")),
                          save_histogram=spec.get("save_histogram", True))
    raise ValueError(kind)
"""

SPECS = [
    {"kind": "save_config", "save_config": {"common": {}}},
    {
        "kind": "save_config",
        "save_config": {"common": {"save_interval": 11, "start_step": 10, "save_steps": [50]}},
    },
    {"kind": "save_config", "save_config": {"common": {"end_step": 0}}},
    {
        "kind": "save_config",
        "save_config": {"modes": {"EVAL": {"start_step": 1}, "TRAIN": {"save_interval": 10, "end_step": 90}}},
    },
    {"kind": "save_config", "save_config": {"modes": {"PREDICT": None, "GLOBAL": {"save_steps": [1, 7]}}}},
    {"kind": "reduction", "args": {}},
    {"kind": "reduction", "args": {"reductions": ["min"], "norms": ["l2"]}},
    {
        "kind": "reduction",
        "args": {
            "reductions": ["max", "mean", "variance"],
            "abs_reductions": ["min", "sum"],
            "norms": ["l1", "l2"],
            "abs_norms": ["l2"],
            "save_raw_tensor": True,
            "save_shape": True,
        },
    },
    {"kind": "collection", "name": "trial"},
    {
        "kind": "collection",
        "name": "default",
        "include_regex": ["conv2d", "^fc.*_output_0$"],
        "tensor_names": ["b", "a"],
        "reduction": {"reductions": ["mean"], "abs_norms": ["l1"]},
        "save_config": {"modes": {"TRAIN": {"save_interval": 10}, "EVAL": {"start_step": 1}}},
        "save_histogram": False,
    },
]


def _ours(spec):
    ns: dict = {}
    exec(BUILDER, ns)  # noqa: S102 - our own constant source text
    return ns["build"](spec, SaveConfig, SaveConfigMode, ReductionConfig, Collection, modes)


_CLASSES = {"save_config": SaveConfig, "reduction": ReductionConfig, "collection": Collection}


def test_to_json_strings_match_smdebug_and_read_back_both_ways(tmp_path: Path):
    ours = [_ours(spec) for spec in SPECS]
    cm = CollectionManager()
    for obj in ours:
        if isinstance(obj, Collection):
            cm.add(obj)
    cm.set_num_workers(3)
    our_file = Path(cm.export(str(tmp_path / "ours"), "worker_0_collections.json"))

    res = run_smdebug(
        BUILDER
        + """
from smdebug import modes
from smdebug.core.collection import Collection
from smdebug.core.collection_manager import CollectionManager
from smdebug.core.reduction_config import ReductionConfig
from smdebug.core.save_config import SaveConfig, SaveConfigMode
classes = {"save_config": SaveConfig, "reduction": ReductionConfig, "collection": Collection}
built, reread = [], []
cm = CollectionManager()
for spec, our_json in zip(INPUT["specs"], INPUT["ours"]):
    obj = build(spec, SaveConfig, SaveConfigMode, ReductionConfig, Collection, modes)
    built.append(obj.to_json())
    reread.append(classes[spec["kind"]].from_json(our_json).to_json())
    if spec["kind"] == "collection":
        cm.add(obj)
cm.update_meta({"num_workers": 3})
cm.export(INPUT["dir"], "worker_0_collections.json")
loaded = CollectionManager.load(INPUT["our_file"])
emit({"built": built, "reread": reread, "loaded_equal": loaded == cm})
""",
        inputs={
            "specs": SPECS,
            "ours": [o.to_json() for o in ours],
            "dir": str(tmp_path / "smdebug"),
            "our_file": str(our_file),
        },
    )
    smd_built = res.data["built"]
    for spec, obj, smd_json, smd_reread in zip(SPECS, ours, smd_built, res.data["reread"]):
        assert obj.to_json() == smd_json, spec
        assert smd_reread == obj.to_json(), spec
        assert _CLASSES[spec["kind"]].from_json(smd_json) == obj, spec
    assert res.data["loaded_equal"] is True
    smd_file = tmp_path / "smdebug" / "collections" / "000000000" / "worker_0_collections.json"
    assert our_file.read_bytes() == smd_file.read_bytes()
    assert CollectionManager.load(str(smd_file)) == cm
    assert json.loads(smd_file.read_text())["_meta"] == {"num_workers": 3}

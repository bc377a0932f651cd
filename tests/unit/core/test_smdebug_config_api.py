"""smdebug's config API: positional signatures, the from_json/to_json family and CollectionManager.

Scenarios follow smdebug 1.0.34's own core tests (collections, save config,
reduction config), written against Tornasole's classes.
"""

from __future__ import annotations

import json

import pytest

from tornasole import modes
from tornasole.core import Collection, CollectionManager, ReductionConfig, SaveConfig, SaveConfigMode
from tornasole.exceptions import ConfigurationError


def test_save_config_first_positional_parameter_is_the_mode_dict():
    sc = SaveConfig({modes.TRAIN: SaveConfigMode(save_interval=10), modes.EVAL: SaveConfigMode(start_step=1)})
    assert sc.get_save_config(modes.TRAIN).save_interval == 10
    assert sc.get_save_config(modes.EVAL).start_step == 1
    assert sc.to_json_dict()["PREDICT"] is None
    # keyword use of the common settings keeps working
    assert SaveConfig(save_interval=3).get_save_config(modes.PREDICT).save_interval == 3


def test_save_config_positional_integer_says_which_parameter_it_hit():
    with pytest.raises(ConfigurationError, match=r"mode_save_configs.*save_interval=10"):
        SaveConfig(10)


@pytest.mark.parametrize(
    "sc",
    [
        SaveConfig(save_interval=11, start_step=10, save_steps=[50]),
        SaveConfig(),
        SaveConfig(start_step=100),
        SaveConfig({modes.TRAIN: SaveConfigMode(save_interval=2, end_step=9)}),
    ],
)
def test_save_config_json_round_trip(sc):
    back = SaveConfig.from_json(sc.to_json())
    assert back == sc
    assert back.to_json() == sc.to_json()


def test_save_config_end_step_zero_saves_nothing():
    s = SaveConfig(end_step=0)
    assert [s.should_save_step(modes.GLOBAL, n) for n in (0, 19, 100)] == [False, False, False]


def test_save_config_mode_json_and_from_dict_defaults():
    m = SaveConfigMode(save_interval=4, save_steps=[1, 2])
    assert json.loads(m.to_json()) == {
        "save_interval": 4,
        "save_steps": [1, 2],
        "start_step": 0,
        "end_step": None,
    }
    assert SaveConfigMode.from_json(m.to_json()) == m
    filled = SaveConfigMode.from_dict({"start_step": 3}, {"save_interval": 7, "start_step": 1})
    assert (filled.save_interval, filled.start_step) == (7, 3)
    sc = SaveConfig.from_dict({"TRAIN": {"end_step": 5}, "EVAL": None}, {"save_interval": 2})
    assert sc.get_save_config(modes.TRAIN) == SaveConfigMode(save_interval=2, end_step=5)
    assert sc.to_json_dict()["EVAL"] is None


def test_merge_default_save_config_fills_only_unconfigured_modes():
    sc = SaveConfig({modes.TRAIN: SaveConfigMode(save_interval=2)})
    sc.merge_default_save_config(SaveConfig(save_interval=9))
    assert sc.get_save_config(modes.TRAIN).save_interval == 2
    assert sc.to_json_dict()["EVAL"]["save_interval"] == 9


def test_from_json_rejects_garbage_naming_the_class():
    with pytest.raises(ConfigurationError, match="SaveConfig.from_json"):
        SaveConfig.from_json("{not json")
    with pytest.raises(ConfigurationError, match="ReductionConfig.from_json"):
        ReductionConfig.from_json("[")
    with pytest.raises(ConfigurationError, match="Collection.from_json"):
        Collection.from_json("")


@pytest.mark.parametrize(
    "rc",
    [
        ReductionConfig(reductions=["min"], norms=["l2"]),
        ReductionConfig(),
        ReductionConfig(save_raw_tensor=True),
    ],
)
def test_reduction_config_json_round_trip(rc):
    back = ReductionConfig.from_json(rc.to_json())
    assert back == rc
    assert back.to_json() == rc.to_json()


def test_collection_json_round_trip_keeps_tensor_names_as_a_set():
    c1 = Collection(
        "default", include_regex=["conv2d"], tensor_names=["a", "b"], reduction_config=ReductionConfig()
    )
    c2 = Collection.from_json(c1.to_json())
    assert c1 == c2
    assert c2.tensor_names == {"a", "b"}
    assert isinstance(c2.tensor_names, set)
    assert Collection.from_json(Collection("trial").to_json()) == Collection("trial")


def test_collection_json_round_trip_with_a_mode_dict_save_config():
    c1 = Collection(
        "default",
        include_regex=["conv2d"],
        reduction_config=ReductionConfig(),
        save_config=SaveConfig(
            {modes.TRAIN: SaveConfigMode(save_interval=10), modes.EVAL: SaveConfigMode(start_step=1)}
        ),
    )
    c2 = Collection.from_json(c1.to_json())
    assert c1 == c2
    assert c1.to_json_dict() == c2.to_json_dict()
    assert Collection.from_dict(c1.to_json_dict()) == c1


def test_collection_manager_create_get_add():
    cm = CollectionManager()
    cm.create_collection("default")
    cm.get("default").include("loss")
    cm.get("default").add_tensor_name("assaas")
    cm.add(Collection("trial1"))
    cm.add("trial2")
    cm.get("trial2").include("total_loss")
    cm.create_collection("default")  # exists: left alone
    assert len(cm.collections) == 3
    assert cm.get_collections() is cm.collections
    assert cm.get("default") == cm.collections["default"]
    assert "loss" in cm.get("default").include_regex
    assert cm.get("default").tensor_names == {"assaas"}
    assert "total_loss" in cm.collections["trial2"].include_regex
    with pytest.raises(ConfigurationError, match="missing_one"):
        cm.get("missing_one", create=False)


def test_collection_manager_export_load(tmp_path):
    cm = CollectionManager()
    cm.create_collection("default")
    cm.get("default").include("loss")
    cm.add(Collection("trial1"))
    cm.add("trial2")
    cm.set_num_workers(2)
    path = cm.export(str(tmp_path), "worker_0_collections.json")
    assert path == f"{tmp_path}/collections/000000000/worker_0_collections.json"
    text = (tmp_path / "collections" / "000000000" / "worker_0_collections.json").read_text()
    assert text == cm.to_json()
    assert list(json.loads(text)) == ["collections", "_meta"]
    cm2 = CollectionManager.load(path)
    assert cm == cm2
    assert cm2.get_num_workers() == 2
    cm2.update_meta({"num_workers": 4})
    assert cm2.to_json_dict()["_meta"] == {"num_workers": 4}


def test_collection_manager_load_errors_name_the_file(tmp_path):
    bad = tmp_path / "c.json"
    bad.write_text('{"collections": {}, "extra": 1}')
    with pytest.raises(ConfigurationError, match=r"c\.json.*extra"):
        CollectionManager.load(str(bad))
    with pytest.raises(ConfigurationError, match="cannot read collections file"):
        CollectionManager.load(str(tmp_path / "absent.json"))
    with pytest.raises(ConfigurationError, match="not valid JSON"):
        CollectionManager.load_from_string("{")


def test_union_of_save_configs_saves_every_step_either_saves():
    a = SaveConfigMode(save_interval=500)
    b = SaveConfigMode(save_interval=10, save_steps=[3])
    u = SaveConfigMode.union(a, b)
    assert u == SaveConfigMode(save_interval=10, save_steps=[3])  # 10 divides 500: a plain config
    odd = SaveConfigMode.union(SaveConfigMode(save_interval=4), SaveConfigMode(save_interval=6, start_step=6))
    assert [s for s in range(25) if odd.should_save_step(s)] == [0, 4, 6, 8, 12, 16, 18, 20, 24]
    assert odd.to_json_dict()["save_interval"] == 4
    assert odd != SaveConfigMode(save_interval=4)  # the alternative counts for equality and grouping
    assert SaveConfigMode.union(odd, odd) == odd
    sc = SaveConfig.union(
        SaveConfig({modes.TRAIN: SaveConfigMode(save_interval=5)}),
        SaveConfig(
            {modes.TRAIN: SaveConfigMode(save_interval=2), modes.EVAL: SaveConfigMode(save_steps=[1])}
        ),
    )
    assert [s for s in range(11) if sc.should_save_step(modes.TRAIN, s)] == [0, 2, 4, 5, 6, 8, 10]
    assert sc.should_save_step(modes.EVAL, 1)
    assert sc.to_json_dict()["PREDICT"] is None


def test_collection_keys_have_every_smdebug_name():
    from tornasole.core.collection import NON_HISTOGRAM_COLLECTIONS, SCALAR_COLLECTIONS, CollectionKeys

    smdebug_keys = {
        "DEFAULT": "default", "ALL": "all", "INPUTS": "inputs", "OUTPUTS": "outputs", "WEIGHTS": "weights",
        "GRADIENTS": "gradients", "LOSSES": "losses", "BIASES": "biases", "LAYERS": "layers",
        "SM_METRICS": "sm_metrics", "OPTIMIZER_VARIABLES": "optimizer_variables",
        "TENSORFLOW_SUMMARIES": "tensorflow_summaries", "METRICS": "metrics",
        "HYPERPARAMETERS": "hyperparameters", "PREDICTIONS": "predictions", "LABELS": "labels",
        "FEATURE_IMPORTANCE": "feature_importance", "AVERAGE_SHAP": "average_shap",
        "FULL_SHAP": "full_shap", "TREES": "trees",
    }  # fmt: skip
    assert {k: getattr(CollectionKeys, k) for k in smdebug_keys} == smdebug_keys
    assert {"feature_importance", "average_shap", "losses"} <= SCALAR_COLLECTIONS
    assert "tensorflow_summaries" in NON_HISTOGRAM_COLLECTIONS

"""Model classes: validation, JSON shapes of FORMAT.md 4, and round trips of the smdebug fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tornasole import modes
from tornasole.core import (
    Collection,
    CollectionKeys,
    CollectionManager,
    ReductionConfig,
    SaveConfig,
    SaveConfigMode,
)
from tornasole.exceptions import ConfigurationError


def test_save_config_mode_interval_range_and_explicit_steps():
    c = SaveConfigMode(save_interval=5, start_step=10, end_step=30, save_steps=[3])
    saved = [s for s in range(40) if c.should_save_step(s)]
    assert saved == [3, 10, 15, 20, 25]


def test_save_config_defaults_and_common_settings_fill_all_modes():
    sc = SaveConfig(save_interval=4)
    d = sc.to_json_dict()
    assert list(d) == ["TRAIN", "EVAL", "PREDICT", "GLOBAL"]
    assert d["PREDICT"] == {"save_interval": 4, "save_steps": [], "start_step": 0, "end_step": None}
    assert SaveConfig().get_save_config(modes.TRAIN).save_interval == 500


def test_per_mode_save_config_keeps_unconfigured_modes_null_but_saves_with_defaults():
    sc = SaveConfig(
        mode_save_configs={modes.TRAIN: SaveConfigMode(save_interval=5), "EVAL": {"save_interval": 2}}
    )
    d = sc.to_json_dict()
    assert d["PREDICT"] is None
    assert d["GLOBAL"] is None
    assert d["EVAL"]["save_interval"] == 2
    assert sc.should_save_step(modes.EVAL, 4)
    assert not sc.should_save_step(modes.EVAL, 3)
    assert sc.should_save_step(modes.PREDICT, 500)
    assert not sc.should_save_step(modes.PREDICT, 5)
    assert SaveConfig.from_json_dict(d) == sc


def test_merged_with_fills_only_unconfigured_modes():
    own = SaveConfig(mode_save_configs={modes.TRAIN: SaveConfigMode(save_interval=3)})
    merged = own.merged_with(SaveConfig(save_interval=7))
    assert merged.get_save_config(modes.TRAIN).save_interval == 3
    assert merged.get_save_config(modes.EVAL).save_interval == 7
    assert own.to_json_dict()["EVAL"] is None


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"save_interval": "x"}, "'x'"),
        ({"save_interval": 0}, "save_interval=0"),
        ({"end_step": "e"}, "end_step='e'"),
    ],
)
def test_save_config_validation_names_the_bad_value(kwargs, needle):
    with pytest.raises(ConfigurationError, match=needle):
        SaveConfig(**kwargs)


def test_reduction_config_string_order_and_round_trip():
    rc = ReductionConfig(
        reductions=["min", "max", "mean"],
        abs_reductions=["mean", "max"],
        norms=["l1", "l2"],
        abs_norms=["l2"],
        save_shape=True,
    )
    assert rc.to_json_dict() == {
        "save_raw_tensor": False,
        "reductions": "min,max,mean,l1_norm,l2_norm,abs_mean,abs_max,abs_l2_norm",
        "save_shape": True,
    }
    assert ReductionConfig.from_json_dict(rc.to_json_dict()) == rc
    assert rc.ordered()[3] == ("l1", False)
    assert rc.ordered()[-1] == ("l2", True)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"reductions": ["median"]}, "'median'"),
        ({"norms": ["l3"]}, "'l3'"),
        ({"abs_reductions": ["avg"]}, "'avg'"),
        ({"save_raw_tensor": "maybe"}, "'maybe'"),
    ],
)
def test_reduction_config_validation_names_the_bad_value(kwargs, needle):
    with pytest.raises(ConfigurationError, match=needle):
        ReductionConfig(**kwargs)


def test_reduction_config_is_immutable_so_sharing_is_safe():
    rc = ReductionConfig(reductions=["mean"])
    with pytest.raises(AttributeError):
        rc.save_raw_tensor = True  # type: ignore[misc]


def test_collection_membership_by_regex_and_name():
    c = Collection("w", include_regex="^(?!gradient).*weight")
    assert c.matches("Net_fc1.weight")
    assert not c.matches("gradient/Net_fc1.weight")
    c.add_tensor("custom_vec")
    assert c.matches("custom_vec")
    with pytest.raises(ConfigurationError, match=r"'\('"):
        c.include("(")


def test_pytorch_default_collections_use_smdebug_regexes():
    cm = CollectionManager.pytorch_defaults()
    assert list(cm.collections) == ["all", "default", "weights", "biases", "gradients", "losses"]
    losses = cm.get(CollectionKeys.LOSSES)
    assert losses.matches("CrossEntropyLoss_output_0")
    assert not losses.matches("MSELoss_input_0")
    assert losses.save_histogram is False
    assert cm.get(CollectionKeys.GRADIENTS).matches("gradient/Net_fc1.bias")
    assert cm.get(CollectionKeys.BIASES).matches("Net_fc2.bias")
    assert cm.get(CollectionKeys.OUTPUTS).matches("relu_output_0")


@pytest.mark.parametrize("fixture", ["pt_hook_single", "pt_dist_2workers", "core_writer_2workers"])
def test_fixture_collections_round_trip_byte_for_byte(fixtures_dir: Path, fixture: str):
    for path in sorted((fixtures_dir / fixture / "collections" / "000000000").glob("*_collections.json")):
        raw = path.read_text()
        doc = json.loads(raw)
        cm = CollectionManager.from_json_dicts(doc["collections"])
        again = json.dumps({"collections": cm.to_json_dicts(), "_meta": doc["_meta"]})
        assert again == raw, path

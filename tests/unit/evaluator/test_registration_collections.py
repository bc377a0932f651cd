"""Duplicate CollectionConfigurations merge as the UNION of their save steps, whatever their order."""

from __future__ import annotations

import itertools
import random

import pytest

from tornasole.core.collection_merge import SaveRange, merge_collection_configurations, union_of_ranges
from tornasole.core.save_config import SaveConfigMode
from tornasole.exceptions import ConfigurationError

STEPS = range(3000)


def _saved(params: dict[str, str], mode: str = "train", hook: dict | None = None) -> set[int]:
    """Steps a hook saves for these CollectionParameters (SaveConfigMode is the hook's own model)."""
    settings = {}
    for source in (hook or {}, params):
        for key, value in source.items():
            m, _, bare = key.rpartition(".")
            if m in ("", mode):
                settings[bare] = value
    cfg = SaveConfigMode(
        save_interval=int(settings.get("save_interval", 500)),
        start_step=int(settings.get("start_step", 0)),
        end_step=int(settings["end_step"]) if settings.get("end_step") else None,
        save_steps=[int(s) for s in str(settings.get("save_steps", "")).split(",") if s.strip()],
    )
    return {s for s in STEPS if cfg.should_save_step(s)}


def _entry(name: str, **params: str) -> dict:
    return {"CollectionName": name, "CollectionParameters": params}


CASES = [
    # the SDK's rule default with the user's per-step saving
    [{"save_interval": "500"}, {"save_interval": "1"}],
    [{"save_interval": "500"}, {"save_interval": "10"}],
    # a finite burst beside a coarse interval becomes explicit steps
    [{"save_interval": "100"}, {"save_interval": "7", "start_step": "3", "end_step": "60"}],
    [{"save_steps": "0,1,2"}, {"save_interval": "25"}],
    # ranges that do not nest
    [{"save_interval": "10", "end_step": "100"}, {"save_interval": "50", "start_step": "50"}],
    # incompatible infinite progressions: a superset is the best one progression can do
    [{"save_interval": "6"}, {"save_interval": "10"}],
    [
        {"save_interval": "4", "start_step": "8"},
        {"save_interval": "6", "end_step": "2400"},
        {"save_steps": "5"},
    ],
]


@pytest.mark.parametrize("group", CASES)
def test_merged_entry_saves_every_requested_step(group: list[dict[str, str]]) -> None:
    requested = set().union(*(_saved(p) for p in group))
    for order in itertools.permutations(group):
        merged, inexact = merge_collection_configurations([_entry("losses", **p) for p in order])
        (entry,) = merged
        saved = _saved(entry["CollectionParameters"])
        assert requested <= saved
        if not inexact:
            assert saved == requested
    first, _ = merge_collection_configurations([_entry("losses", **p) for p in group])
    last, _ = merge_collection_configurations([_entry("losses", **p) for p in reversed(group)])
    assert first == last  # the SDK's order changes from run to run; the result must not


def test_exact_unions_are_recognised() -> None:
    assert union_of_ranges([SaveRange(500), SaveRange(1)]) == (SaveRange(1), True)
    merged, inexact = merge_collection_configurations(
        [_entry("losses", save_interval="500"), _entry("losses", save_interval="1")]
    )
    assert merged == [
        {
            "CollectionName": "losses",
            "CollectionParameters": {"save_interval": "1", "start_step": "0", "save_steps": ""},
        }
    ]
    assert inexact == []
    _, inexact = merge_collection_configurations(
        [_entry("losses", save_interval="6"), _entry("losses", save_interval="10")]
    )
    assert inexact == ["losses"]


def test_per_mode_settings_and_hook_defaults_are_respected() -> None:
    hook = {"save_interval": "10"}
    group = [{"save_interval": "500"}, {"train.save_interval": "5"}]
    merged, _ = merge_collection_configurations([_entry("gradients", **p) for p in group], hook)
    params = merged[0]["CollectionParameters"]
    # TRAIN: 500 or 5 -> every 5th; EVAL: 500 or the hook's 10 (the second entry set only TRAIN) -> every 10th
    assert _saved(params, "train", hook) == {s for s in STEPS if s % 5 == 0}
    assert _saved(params, "eval", hook) == {s for s in STEPS if s % 10 == 0}


def test_other_parameters_are_united_and_single_names_kept_as_given() -> None:
    merged, _ = merge_collection_configurations(
        [
            _entry("weights", save_interval="3"),
            _entry("relu", include_regex="relu_a", reductions="mean", save_raw_tensor="false"),
            _entry("relu", include_regex="relu_b,relu_a", reductions="max", save_raw_tensor="true"),
        ]
    )
    assert merged[0] == _entry("weights", save_interval="3")
    params = merged[1]["CollectionParameters"]
    assert (params["include_regex"], params["reductions"], params["save_raw_tensor"]) == (
        "relu_a,relu_b",
        "max,mean",
        "true",
    )


def test_random_groups_never_lose_a_step() -> None:
    rng = random.Random(7)
    for _ in range(150):
        group = []
        for _ in range(rng.randint(2, 4)):
            p = {"save_interval": str(rng.choice([1, 2, 3, 5, 10, 25, 100, 500]))}
            if rng.random() < 0.4:
                p["start_step"] = str(rng.randint(0, 200))
            if rng.random() < 0.4:
                p["end_step"] = str(rng.randint(200, 2500))
            if rng.random() < 0.3:
                p["save_steps"] = ",".join(str(rng.randint(0, 2999)) for _ in range(3))
            group.append(p)
        merged, inexact = merge_collection_configurations([_entry("c", **p) for p in group])
        requested = set().union(*(_saved(p) for p in group))
        saved = _saved(merged[0]["CollectionParameters"])
        assert requested <= saved, group
        if not inexact:
            assert saved == requested, group


def test_a_save_setting_that_is_not_an_integer_names_collection_mode_and_key() -> None:
    with pytest.raises(ConfigurationError, match=r"collection 'losses' \(train\): save_interval='ten'"):
        merge_collection_configurations([_entry("losses", save_interval="ten"), _entry("losses")])

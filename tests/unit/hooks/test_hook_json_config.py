"""Creating a hook from a SageMaker DebugHookConfig JSON file; errors name the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tornasole import Hook, modes
from tornasole.exceptions import ConfigurationError
from tornasole.trials import create_trial


def _write(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(doc))
    return path


def test_full_config_sets_paths_params_and_collections(tmp_path: Path):
    out = tmp_path / "out"
    cfg = _write(
        tmp_path,
        {
            "S3OutputPath": "s3://ignored-when-local-path/x",
            "LocalPath": str(out),
            "HookParameters": {
                "save_interval": "4",
                "eval.save_interval": "1",
                "include_regex": "^keep, ^also",
                "reductions": "mean,abs_max,l2_norm",
                "save_raw_tensor": "true",
                "include_workers": "all",
                "export_tensorboard": "false",
            },
            "CollectionConfigurations": [
                {"CollectionName": "weights"},
                {
                    "CollectionName": "custom",
                    "CollectionParameters": {
                        "include_regex": "^custom_",
                        "save_steps": "1,3",
                        "train.save_interval": "100",
                        "reductions": "min",
                        "save_histogram": "false",
                    },
                },
            ],
        },
    )
    hook = Hook.create_from_json_file(str(cfg))
    try:
        assert hook.out_dir == str(out)
        assert hook.include_workers == "all"
        assert hook.save_config.get_save_config(modes.TRAIN).save_interval == 4
        assert hook.save_config.get_save_config(modes.EVAL).save_interval == 1
        assert hook.reduction_config.to_json_dict()["reductions"] == "mean,l2_norm,abs_max"
        assert hook.reduction_config.save_raw_tensor is True
        assert hook.get_collection("default").include_regex == ["^keep", "^also"]
        custom = hook.get_collection("custom")
        assert custom.include_regex == ["^custom_"]
        assert custom.save_histogram is False
        assert custom.reduction_config.reductions == ("min",)
        train = custom.save_config.get_save_config(modes.TRAIN)
        assert (train.save_interval, train.save_steps) == (100, [1, 3])
        # the hook's eval.* setting is the default for the collection's EVAL mode
        assert custom.save_config.get_save_config(modes.EVAL).save_interval == 1
        assert {"weights", "custom"} <= set(hook._saves.include_collections)
        hook.set_mode(modes.TRAIN)
        for i in range(4):
            hook.save_tensor("custom_a", np.full(2, i, dtype=np.float32), "custom")
            hook.next_step()
    finally:
        hook.close()
    t = create_trial(str(out)).tensor("custom_a")
    assert t.steps() == [0, 1, 3]
    assert t.reduction_value(3, "min") == pytest.approx(3.0)


def test_path_from_environment_variable_and_s3_output_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cfg = _write(tmp_path, {"S3OutputPath": "s3://bucket/prefix", "HookParameters": {"save_interval": "7"}})
    monkeypatch.setenv("TORNASOLE_CONFIG_FILE_PATH", str(cfg))
    hook = Hook.create_from_json_file(stop_check_interval=None, enabled=False)
    assert hook.out_dir == "s3://bucket/prefix"
    assert hook.save_config.get_save_config(modes.PREDICT).save_interval == 7


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        (
            {"LocalPath": "/x", "HookParameters": {"save_interval": "ten"}},
            "HookParameters.save_interval='ten'",
        ),
        ({"LocalPath": "/x", "HookParameters": {"reductions": "median"}}, "HookParameters.reductions"),
        ({"LocalPath": "/x", "HookParameters": {"save_all": "maybe"}}, "HookParameters.save_all='maybe'"),
        ({"LocalPath": "/x", "HookParameters": {"include_workers": "two"}}, "include_workers='two'"),
        (
            {"LocalPath": "/x", "CollectionConfigurations": [{"CollectionParameters": {}}]},
            r"\[0\].CollectionName",
        ),
        (
            {
                "LocalPath": "/x",
                "CollectionConfigurations": [
                    {"CollectionName": "c", "CollectionParameters": {"eval.start_step": "x"}}
                ],
            },
            r"\(c\).CollectionParameters.eval.start_step='x'",
        ),
        ({"HookParameters": {}}, "neither 'LocalPath' nor 'S3OutputPath'"),
        ({"LocalPath": "/x", "HookParameters": "save_interval=1"}, "HookParameters must be an object"),
    ],
)
def test_errors_name_the_file_and_field(tmp_path: Path, doc: dict, needle: str):
    cfg = _write(tmp_path, doc)
    with pytest.raises(ConfigurationError, match=needle) as info:
        Hook.create_from_json_file(str(cfg))
    assert str(cfg) in str(info.value)


def test_missing_and_malformed_files_are_named(tmp_path: Path):
    missing = tmp_path / "nope.json"
    with pytest.raises(ConfigurationError, match=str(missing)):
        Hook.create_from_json_file(str(missing))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigurationError, match="bad.json: not valid JSON"):
        Hook.create_from_json_file(str(bad))

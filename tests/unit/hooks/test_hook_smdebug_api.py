"""smdebug's hook API: get_hook/del_hook, configuration variables, SageMaker's paths, duplicate collections.

Scenarios port smdebug 1.0.34's tests of the zero-code-change path (a hook
picked up from the configuration file), its hook constructor and its public
methods, in Tornasole's words.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import tornasole
import tornasole.pytorch as ts
from tornasole import Hook, SaveConfig, modes
from tornasole.exceptions import ConfigurationError
from tornasole.hooks import HookConfigNotFound
from tornasole.trials import create_trial


@pytest.fixture(autouse=True)
def _no_hook_and_no_config_variables(monkeypatch: pytest.MonkeyPatch):
    for var in ("TORNASOLE_CONFIG_FILE_PATH", "SMDEBUG_CONFIG_FILE_PATH", "TRAINING_JOB_NAME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TENSORBOARD_CONFIG_FILE_PATH", "")
    tornasole.del_hook()
    yield
    hook = tornasole.get_hook()
    tornasole.del_hook()
    if hook is not None:
        hook.close()


def _config(tmp_path: Path, doc: dict, name: str = "debughookconfig.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_get_hook_without_configuration_is_none(tmp_path: Path):
    assert ts.get_hook() is None
    assert ts.get_hook(create_if_not_exists=True, json_config_path=str(tmp_path / "absent.json")) is None
    assert (
        tornasole.get_hook(create_if_not_exists=True, json_config_path=str(tmp_path / "absent.json")) is None
    )


def test_get_hook_creates_from_smdebug_variable_once_and_del_hook_forgets(tmp_path, monkeypatch):
    cfg = _config(tmp_path, {"LocalPath": str(tmp_path / "run"), "HookParameters": {"save_interval": "1"}})
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(cfg))
    hook = ts.get_hook(create_if_not_exists=True)
    assert isinstance(hook, ts.Hook)
    assert hook.out_dir == str(tmp_path / "run")
    assert ts.get_hook() is hook
    assert ts.get_hook(create_if_not_exists=True) is hook
    assert tornasole.get_hook() is hook  # one singleton per process, a PyTorch hook is a core hook too
    ts.del_hook()
    assert ts.get_hook() is None
    hook.close()


def test_get_hook_of_another_class_is_replaced(tmp_path):
    core = Hook(str(tmp_path / "core"), enabled=False)
    tornasole.set_hook(core)
    assert tornasole.get_hook() is core
    cfg = _config(tmp_path, {"LocalPath": str(tmp_path / "pt")})
    pt = ts.get_hook(json_config_path=str(cfg), create_if_not_exists=True)
    assert isinstance(pt, ts.Hook)
    assert pt is not core
    with pytest.raises(ConfigurationError, match="not a Tornasole hook"):
        ts.set_hook(object())


def test_get_hook_picks_up_the_zero_code_change_hook_in_a_training_loop(tmp_path, monkeypatch):
    out = tmp_path / "run"
    cfg = _config(
        tmp_path,
        {
            "LocalPath": str(out),
            "HookParameters": {"save_interval": "1"},
            "CollectionConfigurations": [{"CollectionName": "weights"}, {"CollectionName": "losses"}],
        },
    )
    monkeypatch.setenv("TORNASOLE_CONFIG_FILE_PATH", str(cfg))
    model, loss_fn = nn.Linear(3, 1), nn.MSELoss()
    hook = ts.get_hook(create_if_not_exists=True)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for _ in range(3):
        loss_fn(model(torch.randn(4, 3)), torch.randn(4, 1)).backward()
    hook.close()
    trial = create_trial(str(out))
    assert trial.tensor("Linear_weight").steps() == [0, 1, 2]
    assert trial.tensor("MSELoss_output_0").steps() == [0, 1, 2]


def test_configuration_variables_precedence_and_error_names_them(tmp_path, monkeypatch):
    a = _config(tmp_path, {"LocalPath": str(tmp_path / "a")}, "a.json")
    b = _config(tmp_path, {"LocalPath": str(tmp_path / "b")}, "b.json")
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(b))
    assert Hook.create_from_json_file(enabled=False).out_dir == str(tmp_path / "b")
    monkeypatch.setenv("TORNASOLE_CONFIG_FILE_PATH", str(a))
    assert Hook.create_from_json_file(enabled=False).out_dir == str(tmp_path / "a")
    assert Hook.create_from_json_file(str(b), enabled=False).out_dir == str(tmp_path / "b")

    monkeypatch.delenv("TORNASOLE_CONFIG_FILE_PATH")
    monkeypatch.delenv("SMDEBUG_CONFIG_FILE_PATH")
    with pytest.raises(HookConfigNotFound) as info:
        Hook.create_from_json_file()
    msg = str(info.value)
    assert "/opt/ml/input/config/debughookconfig.json" in msg
    assert "TORNASOLE_CONFIG_FILE_PATH" in msg
    assert "SMDEBUG_CONFIG_FILE_PATH" in msg
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(tmp_path / "gone.json"))
    with pytest.raises(FileNotFoundError, match=r"gone\.json \(\$SMDEBUG_CONFIG_FILE_PATH\)"):
        Hook.create_from_json_file()


@pytest.mark.parametrize(
    ("doc", "env_job", "expected"),
    [
        ({"S3OutputPath": "s3://b/p"}, "job-7", "s3://b/p/job-7/debug-output"),
        ({"S3OutputPath": "s3://b/p/", "TrainingJobName": "job-8"}, None, "s3://b/p/job-8/debug-output"),
        ({"S3OutputPath": "s3://b/p/job-9/debug-output"}, "job-9", "s3://b/p/job-9/debug-output"),
        ({"S3OutputPath": "s3://b/p"}, None, "s3://b/p"),
        (
            {"S3OutputPath": "s3://b/p", "LocalPath": "/opt/ml/output/tensors"},
            "job-7",
            "/opt/ml/output/tensors",
        ),
    ],
)
def test_sagemaker_output_path_convention(tmp_path, monkeypatch, doc, env_job, expected):
    if env_job:
        monkeypatch.setenv("TRAINING_JOB_NAME", env_job)
    hook = Hook.create_from_json_file(str(_config(tmp_path, doc)), enabled=False)
    assert hook.out_dir == expected


def test_invalid_training_job_name_is_named(tmp_path):
    cfg = _config(tmp_path, {"S3OutputPath": "s3://b/p", "TrainingJobName": "a/b"})
    with pytest.raises(ConfigurationError, match=r"debughookconfig\.json.*'a/b'"):
        Hook.create_from_json_file(str(cfg), enabled=False)


def test_duplicate_collection_configurations_keep_every_requested_step(tmp_path):
    """The SDK sends a rule's ``losses`` (every 500) next to the user's (every 10): both are honoured."""
    out = tmp_path / "run"
    cfg = _config(
        tmp_path,
        {
            "LocalPath": str(out),
            "CollectionConfigurations": [
                {"CollectionName": "losses", "CollectionParameters": {"save_interval": "500"}},
                {
                    "CollectionName": "custom",
                    "CollectionParameters": {"include_regex": "^c_", "save_interval": "4"},
                },
                {"CollectionName": "losses", "CollectionParameters": {"save_interval": "10"}},
                {
                    "CollectionName": "custom",
                    "CollectionParameters": {
                        "save_interval": "6",
                        "reductions": "max",
                        "save_raw_tensor": "true",
                    },
                },
            ],
        },
    )
    hook = Hook.create_from_json_file(str(cfg))
    assert hook.include_collections.count("custom") == 1
    hook.set_mode(modes.TRAIN)
    for step in range(25):
        hook.save_tensor("c_x", np.full(2, step, dtype=np.float32), "custom")
        hook.save_tensor("loss_output_0", np.float32(step), "losses")
        hook.next_step()
    hook.close()
    trial = create_trial(str(out))
    assert trial.tensor("loss_output_0").steps() == [0, 10, 20]
    assert trial.tensor("c_x").steps() == [0, 4, 6, 8, 12, 16, 18, 20, 24]
    assert trial.tensor("c_x").reduction_value(18, "max") == pytest.approx(18.0)
    saved = json.loads((out / "collections" / "000000000" / "worker_0_collections.json").read_text())
    assert saved["collections"]["losses"]["save_config"]["TRAIN"]["save_interval"] == 10


def test_hook_constructor_takes_smdebugs_positional_order(tmp_path):
    hook = ts.Hook(str(tmp_path / "run"), True, None, False, None, SaveConfig(save_interval=3), enabled=False)
    assert hook.tensorboard_dir == str(tmp_path / "run" / "tensorboard")
    assert hook.save_config.get_save_config(modes.TRAIN).save_interval == 3
    assert ts.Hook(str(tmp_path / "r2"), dry_run=True).enabled is False


def test_public_methods_of_smdebugs_hook(tmp_path):
    hook = Hook(str(tmp_path / "run"), save_config=SaveConfig(save_interval=2))
    assert hook.has_default_hook_configuration()
    assert hook.has_default_configuration()
    colls = hook.get_collections()
    assert colls is hook.collection_manager.collections
    assert hook.get_collection("losses") is colls["losses"]

    class Var:
        name = "dense/kernel:0"

    hook.add_to_collection("custom", Var())
    hook.add_to_collection("custom", "bias")
    assert hook.get_collection("custom").tensor_names == {"dense/kernel:0", "bias"}
    with pytest.raises(TypeError, match="no tensor name"):
        hook.add_to_collection("custom", 3)
    hook.save_tensor("t", np.ones(2), "custom")
    assert not hook.has_default_hook_configuration()
    assert hook.should_save_tensor_or_collection("t", "custom") is True  # step 0 is saved
    assert hook.should_save_tensor_or_collection("unrelated", "weights") is False
    hook.next_step()
    assert hook.should_save_tensor_or_collection("t", "custom") is False  # step 1 is not
    hook.export_collections()
    assert (tmp_path / "run" / "collections" / "000000000" / "worker_0_collections.json").exists()
    assert "out_dir=" in repr(hook)
    hook.close()


def test_new_pytorch_hook_becomes_the_process_hook_and_cleanup_closes_it(tmp_path):
    hook = ts.Hook(str(tmp_path / "run"), save_config=SaveConfig(save_interval=1))
    assert ts.get_hook() is hook
    hook._cleanup()  # smdebug's examples call it
    assert hook._closed


def test_add_module_tensors_saves_that_modules_outputs(tmp_path):
    """smdebug's pattern: a model's constructor puts a submodule in a collection through get_hook()."""
    out = tmp_path / "run"
    hook = ts.Hook(
        str(out), save_config=SaveConfig(save_steps=[0, 1]), include_collections=["relu_activations"]
    )

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 4)
            self.relu = nn.ReLU()
            ts.get_hook().get_collection("relu_activations").add_module_tensors(self.relu, inputs=True)

        def forward(self, x):
            return self.relu(self.fc(x))

    model = Net()
    hook.register_module(model)
    outputs = [model(torch.randn(2, 3)) for _ in range(3)]
    hook.close()
    trial = create_trial(str(out))
    assert sorted(trial.tensor_names(collection="relu_activations")) == ["relu_input_0", "relu_output_0"]
    assert trial.tensor("relu_output_0").steps() == [0, 1]
    assert np.allclose(trial.tensor("relu_output_0").value(1), outputs[1].detach().numpy())
    assert hook.get_collection("relu_activations").include_regex == ["relu_input_", "relu_output_"]


def test_sagemaker_container_hook_and_tensorboard_paths(tmp_path, monkeypatch):
    """smdebug's SagemakerSimulator scenario: both of SageMaker's files, found through its variables."""
    hook_cfg = _config(tmp_path, {"LocalPath": str(tmp_path / "tensors"), "S3OutputPath": "s3://b/p"})
    tb_cfg = _config(tmp_path, {"LocalPath": str(tmp_path / "tb"), "S3OutputPath": "s3://b/tb"}, "tb.json")
    monkeypatch.setenv("TRAINING_JOB_NAME", "sm-job")
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(hook_cfg))
    monkeypatch.setenv("TENSORBOARD_CONFIG_FILE_PATH", str(tb_cfg))
    hook = ts.get_hook(create_if_not_exists=True)
    assert hook.out_dir == str(tmp_path / "tensors")  # LocalPath: SageMaker uploads it
    assert hook.tensorboard_dir == str(tmp_path / "tb")

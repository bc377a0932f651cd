"""Zero code change: a DebugHookConfig file turns the Keras hook on; the example script shows it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tornasole.exceptions import ConfigurationError
from tornasole.modes import ModeKeys
from tornasole.trials import create_trial

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "keras_mnist_zero_code_change.py"


def _config(tmp_path: Path, out: Path) -> Path:
    cfg = {
        "LocalPath": str(out),
        "HookParameters": {"save_interval": "4"},
        "CollectionConfigurations": [
            {"CollectionName": "weights"},
            {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "2"}},
            {"CollectionName": "losses"},
        ],
    }
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.fixture
def singleton():
    from tornasole.keras import set_hook

    set_hook(None)
    yield
    set_hook(None)


def test_get_hook_without_a_file_is_none(keras_tf, monkeypatch, singleton):
    from tornasole.hooks import config_paths as mod
    from tornasole.keras import get_hook

    monkeypatch.delenv("TORNASOLE_CONFIG_FILE_PATH", raising=False)
    monkeypatch.delenv("SMDEBUG_CONFIG_FILE_PATH", raising=False)
    monkeypatch.setattr(mod, "SAGEMAKER_HOOK_CONFIG_PATH", "/nonexistent/debughookconfig.json")
    assert get_hook(create_if_not_exists=True) is None


def test_smdebug_variable_creates_one_hook(keras_tf, tmp_path, monkeypatch, singleton):
    from tornasole.keras import Hook, get_hook

    monkeypatch.delenv("TORNASOLE_CONFIG_FILE_PATH", raising=False)
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(_config(tmp_path, tmp_path / "out")))
    hook = get_hook(create_if_not_exists=True)
    assert isinstance(hook, Hook)
    assert get_hook() is hook
    assert hook.out_dir == str(tmp_path / "out")
    assert hook.get_collection("gradients").save_config.get_save_config(ModeKeys.TRAIN).save_interval == 2
    hook.close()
    explicit = Hook.create_from_json_file(str(_config(tmp_path, tmp_path / "out2")), enabled=False)
    assert explicit.out_dir == str(tmp_path / "out2")


def test_named_file_that_is_missing_is_an_error(keras_tf, tmp_path, monkeypatch, singleton):
    from tornasole.keras import get_hook

    monkeypatch.setenv("TORNASOLE_CONFIG_FILE_PATH", str(tmp_path / "missing.json"))
    with pytest.raises(ConfigurationError, match="missing.json"):
        get_hook(create_if_not_exists=True)


def test_example_script_saves_what_the_file_asks(tmp_path):
    out = tmp_path / "tensors"
    env = {
        **os.environ,
        "TORNASOLE_CONFIG_FILE_PATH": str(_config(tmp_path, out)),
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    env.pop("SMDEBUG_CONFIG_FILE_PATH", None)
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), "--epochs", "1", "--samples", "128", "--batch-size", "16"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"hook=on: {out}" in run.stdout
    trial = create_trial(str(out))
    # 128 samples, validation_split 0.25: 6 train batches of 16; gradients every 2, the rest every 4, and
    # the epoch's training logs in its last TRAIN step (5)
    assert trial.steps(mode=ModeKeys.TRAIN) == [0, 2, 4, 5]
    assert trial.tensor("gradients/mnist/conv/kernelGrad").steps(mode=ModeKeys.TRAIN) == [0, 2, 4]
    assert trial.tensor("weights/mnist/conv/kernel").steps(mode=ModeKeys.TRAIN) == [0, 4]
    assert trial.tensor("loss").steps(mode=ModeKeys.TRAIN) == [0, 4, 5]
    # EVAL: 2 validation batches (val_loss in the last), then 8 of evaluate
    assert trial.tensor("loss").steps(mode=ModeKeys.EVAL) == [0, 4, 8]
    assert trial.tensor("val_loss").steps(mode=ModeKeys.EVAL) == [1]
    assert set(trial.tensor_names(collection="weights")) == {
        "weights/mnist/conv/kernel",
        "weights/mnist/hidden/kernel",
        "weights/mnist/probs/kernel",
    }
    assert (out / "training_job_end.ts").exists()

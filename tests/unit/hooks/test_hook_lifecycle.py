"""The end marker outside SageMaker, whatever the variables say, and the warning about a finished trial.

Issue #28: a job that used SageMaker's path convention (``TRAINING_JOB_NAME`` set) outside SageMaker never
completed, because ``close()`` skipped the end marker on that variable alone; and re-running a training into
a finished trial's path gave no sign that the verdict now described overwritten data.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from tornasole import SaveConfig
from tornasole.hooks import Hook
from tornasole.hooks.lifecycle import FinishedTrialWarning, running_on_sagemaker

MARKER = "training_job_end.ts"


def _train(out: Path, steps: int = 2) -> None:
    with Hook(str(out), save_config=SaveConfig(save_interval=1)) as hook:
        for i in range(steps):
            hook.save_tensor("w", np.full(3, float(i)))
            hook.next_step()


def test_training_job_name_alone_still_writes_the_end_marker(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINING_JOB_NAME", "job-1")
    monkeypatch.setattr("tornasole.hooks.lifecycle.RESOURCE_CONFIG_FILE", str(tmp_path / "absent.json"))
    _train(tmp_path / "out")
    assert (tmp_path / "out" / MARKER).exists()


def test_sagemaker_is_the_variable_and_the_resource_config(tmp_path):
    config = tmp_path / "resourceconfig.json"
    assert not running_on_sagemaker({"TRAINING_JOB_NAME": "j"}, str(config))
    config.write_text("{}")
    assert running_on_sagemaker({"TRAINING_JOB_NAME": "j"}, str(config))
    assert not running_on_sagemaker({}, str(config))
    assert not running_on_sagemaker({"TRAINING_JOB_NAME": ""}, str(config))


@pytest.mark.parametrize("hook_module", ["tornasole.keras", "tornasole.xgboost", "tornasole.pytorch"])
def test_framework_hooks_decide_the_marker_in_one_place(hook_module):
    """Keras, XGBoost and PyTorch hooks close through ``Hook.close``: none reads TRAINING_JOB_NAME itself."""
    import importlib.util

    spec = importlib.util.find_spec(f"{hook_module}.hook")  # the source only: no framework import needed
    assert spec is not None
    assert spec.origin is not None
    assert "TRAINING_JOB_NAME" not in Path(spec.origin).read_text()


def test_writing_into_a_finished_trial_warns_once(tmp_path, caplog):
    out = tmp_path / "out"
    _train(out)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        _train(out, steps=3)
    assert [str(w.message) for w in record if w.category is FinishedTrialWarning] == [
        f"Tornasole: {out} already holds a finished trial (training_job_end.ts is there); this run "
        "overwrites its files, and the evaluator reports the rewrite on the job "
        "(use a new output path per run)"
    ]
    assert str(out) in caplog.text


def test_a_fresh_path_does_not_warn(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FinishedTrialWarning)
        _train(tmp_path / "fresh")

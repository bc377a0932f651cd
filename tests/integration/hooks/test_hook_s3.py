"""Hook output straight to S3 (moto server): read back by our trial, uploads retried, stop signal seen."""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np
import torch
from torch import nn

import tornasole.pytorch as ts
from tornasole import modes
from tornasole.aws.clients import s3_client
from tornasole.storage.schemes import get_storage
from tornasole.trials import create_trial


class FlakyStorage:
    """The real S3 backend, except that the first ``failures`` writes raise (a network blip)."""

    def __init__(self, inner: Any, failures: int) -> None:
        self.inner = inner
        self.failures = failures
        self.failed: list[str] = []
        self._lock = threading.Lock()

    def write_atomic(self, path: str, data: bytes) -> None:
        with self._lock:
            if self.failures > 0:
                self.failures -= 1
                self.failed.append(path)
                raise OSError(f"injected S3 failure for {path}")
        self.inner.write_atomic(path, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _train(hook: ts.Hook, steps: int = 4) -> dict[int, np.ndarray]:
    torch.manual_seed(0)
    model, loss_fn = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)), nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(modes.TRAIN)
    weights = {}
    for step in range(steps):
        weights[step] = model[0].weight.detach().numpy().copy()
        opt.zero_grad()
        loss_fn(model(torch.randn(8, 4)), torch.randn(8, 2)).backward()
        opt.step()
    hook.close()
    return weights


def _keys(bucket: str) -> list[str]:
    return [o["Key"] for o in s3_client().list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_training_writes_a_trial_to_s3_that_reads_back(s3_bucket: str):
    path = f"s3://{s3_bucket}/jobs/run1"
    hook = ts.Hook(
        path, save_config=ts.SaveConfig(save_interval=2), include_collections=["weights", "gradients"]
    )
    weights = _train(hook)
    keys = _keys(s3_bucket)
    assert "jobs/run1/training_job_end.ts" in keys
    assert "jobs/run1/collections/000000000/worker_0_collections.json" in keys
    trial = create_trial(path)
    assert trial.steps() == [0, 2]
    for step in (0, 2):
        np.testing.assert_array_equal(trial.tensor("Sequential_0.weight").value(step), weights[step])
    assert trial.tensor("gradient/Sequential_2.bias").steps() == [0, 2]
    assert trial.tensor("MSELoss_output_0").steps() == [0, 2]


def test_upload_that_fails_twice_then_works(s3_bucket: str, caplog):
    path = f"s3://{s3_bucket}/flaky"
    flaky = FlakyStorage(get_storage(path), failures=2)
    caplog.set_level(logging.WARNING)
    hook = ts.Hook(
        path,
        save_config=ts.SaveConfig(save_interval=1),
        include_collections=["weights"],
        storage=flaky,
        retry_base_delay=0.01,
    )
    weights = _train(hook, steps=3)
    # the first upload (step 0's event file) failed twice and was retried: nothing is missing
    assert flaky.failed == [f"{path}/events/000000000000/000000000000_worker_0.tfevents"] * 2
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    trial = create_trial(path)
    assert trial.steps() == [0, 1, 2]
    np.testing.assert_array_equal(trial.tensor("Sequential_0.weight").value(0), weights[0])


def test_upload_that_never_works_is_reported_once_and_training_goes_on(s3_bucket: str, caplog):
    path = f"s3://{s3_bucket}/down"
    flaky = FlakyStorage(get_storage(path), failures=10**6)
    caplog.set_level(logging.WARNING)
    hook = ts.Hook(
        path,
        save_config=ts.SaveConfig(save_interval=1),
        storage=flaky,
        retry_attempts=2,
        retry_base_delay=0.001,
    )
    _train(hook, steps=3)  # returns normally
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert path in errors[0].getMessage()
    assert _keys(s3_bucket) == []


def test_stop_signal_on_s3(s3_bucket: str):
    path = f"s3://{s3_bucket}/stopme"
    hook = ts.Hook(path, stop_check_interval=0.05)
    try:
        assert not hook.stop_requested
        s3_client().put_object(Bucket=s3_bucket, Key="stopme/tornasole_stop_training.json", Body=b"{}")
        assert hook._stop_poller.wait(5.0)
        assert hook.stop_requested
    finally:
        hook.close()


def test_tensorboard_output_to_s3_reads_back_with_tensorboard(s3_bucket: str, tmp_path):
    """``export_tensorboard`` with an ``s3://`` trial: the event files land next to it, one per saved step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    path = f"s3://{s3_bucket}/jobs/tb"
    hook = ts.Hook(path, export_tensorboard=True, save_config=ts.SaveConfig(save_interval=2))
    assert hook.tensorboard_dir == f"{path}/tensorboard"
    _train(hook)
    tb_keys = sorted(k for k in _keys(s3_bucket) if k.startswith("jobs/tb/tensorboard/"))
    assert [k.rsplit("/", 1)[0] for k in tb_keys] == ["jobs/tb/tensorboard/TRAIN"] * 2
    local = tmp_path / "TRAIN"
    local.mkdir()
    for key in tb_keys:
        body = s3_client().get_object(Bucket=s3_bucket, Key=key)["Body"].read()
        (local / key.rsplit("/", 1)[1]).write_bytes(body)
    ea = EventAccumulator(str(local), size_guidance={"scalars": 0})
    ea.Reload()
    losses = create_trial(path).tensor("MSELoss_output_0")
    expected = [(step, float(np.asarray(losses.value(step)).reshape(-1)[0])) for step in (0, 2)]
    assert [(s.step, s.value) for s in ea.Scalars("MSELoss_output_0")] == expected


def test_zero_code_change_hook_writes_under_sagemakers_debug_output_path(
    s3_bucket: str, tmp_path, monkeypatch
):
    """A DebugHookConfig with only ``S3OutputPath`` and a job name: the trial is where SageMaker puts it."""
    import json

    cfg = tmp_path / "debughookconfig.json"
    doc = {
        "S3OutputPath": f"s3://{s3_bucket}/debug",
        "TrainingJobName": "pt-job-1",
        "HookParameters": {"save_interval": "2"},
        "CollectionConfigurations": [{"CollectionName": "weights"}],
    }
    cfg.write_text(json.dumps(doc))
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(cfg))
    ts.del_hook()
    hook = ts.get_hook(create_if_not_exists=True)
    assert hook.out_dir == f"s3://{s3_bucket}/debug/pt-job-1/debug-output"
    weights = _train(hook)
    ts.del_hook()
    assert all(k.startswith("debug/pt-job-1/debug-output/") for k in _keys(s3_bucket))
    trial = create_trial(hook.out_dir)
    np.testing.assert_array_equal(trial.tensor("Sequential_0.weight").value(2), weights[2])

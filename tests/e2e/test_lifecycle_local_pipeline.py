"""Issue #28 end to end: every life-cycle case through `tornasole local up`, as a user drives it.

One local endpoint (scheduled check every second) serves all cases; each case has its own job and path.
Training scripts run in subprocesses with the numpy hook; the CLI registers, delivers SageMaker's event and
reads `jobs status`. Timeouts are parameters (an idle timeout of 2 s), never minutes of sleep.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

BIN = Path(sys.executable).parent
TRAINING_SCRIPT = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    from tornasole import SaveConfig
    from tornasole.hooks import Hook

    out, value, steps, how = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    if out == "-":  # SageMaker's convention: SMDEBUG_CONFIG_FILE_PATH and TRAINING_JOB_NAME
        hook = Hook.create_from_json_file(save_config=SaveConfig(save_interval=1))
    else:
        hook = Hook(out_dir=out, save_config=SaveConfig(save_interval=1))
    for _ in range(steps):
        hook.save_tensor("weights/w", np.full(4, value))
        hook.next_step()
    if how == "dies":  # written, then the process ends without closing its hook (no end marker)
        hook.flush()
        os._exit(0)
    hook.close()
    """
)


@pytest.fixture(scope="module")
def local_up() -> Iterator[dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    for var in ("TRAINING_JOB_NAME", "SMDEBUG_CONFIG_FILE_PATH", "TORNASOLE_CONFIG_FILE_PATH"):
        env.pop(var, None)
    proc = subprocess.Popen(
        [str(BIN / "tornasole"), "local", "up", "--port", "0", "--schedule-seconds", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    exports: dict[str, str] = {}
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if m := re.match(r"\s+export (\w+)=(.*)$", line):
            exports[m.group(1)] = m.group(2)
        if line.startswith("Ctrl-C to stop"):
            break
    assert "AWS_ENDPOINT_URL" in exports, "local up did not print its environment"
    try:
        yield {**env, **exports}
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "tornasole"), *args], env=env, capture_output=True, text=True, timeout=120
    )


def _train(
    env: dict[str, str], tmp_path: Path, out: str, value: float = 1.0, steps: int = 3, how: str = "closes"
) -> subprocess.CompletedProcess:
    script = tmp_path / "train.py"
    script.write_text(TRAINING_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), out, str(value), str(steps), how],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def _register(env: dict[str, str], name: str, out: str, *extra: str) -> None:
    reg = _cli(
        env, "jobs", "register", "--name", name, "--s3-output", out, "--rule", "ExplodingTensor", *extra
    )
    assert reg.returncode == 0, reg.stdout + reg.stderr


def _status(env: dict[str, str], name: str) -> dict[str, Any]:
    proc = _cli(env, "jobs", "status", name, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _wait_for(env: dict[str, str], name: str, status: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        desc = _status(env, name)
        if desc["TrainingJobStatus"] == status or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert desc["TrainingJobStatus"] == status, json.dumps(desc, indent=1)[:3000]
    return desc


def _verdicts(desc: dict[str, Any]) -> dict[str, str]:
    return {
        s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in desc["DebugRuleEvaluationStatuses"]
    }


def test_sagemaker_path_convention_outside_sagemaker_completes(local_up, tmp_path: Path) -> None:
    env = local_up
    base = f"s3://{env['TORNASOLE_TRIAL_BUCKET']}/sm-convention"
    request = {
        "TrainingJobName": "lc-sm-path",
        "DebugHookConfig": {"S3OutputPath": base, "CollectionConfigurations": []},
        "DebugRuleConfigurations": [
            {
                "RuleConfigurationName": "ExplodingTensor",
                "RuleEvaluatorImage": "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules",
                "RuleParameters": {"rule_to_invoke": "ExplodingTensor"},
            }
        ],
    }
    (tmp_path / "request.json").write_text(json.dumps(request))
    reg = _cli(env, "jobs", "register", "--from-request", str(tmp_path / "request.json"))
    assert reg.returncode == 0, reg.stdout + reg.stderr
    (tmp_path / "hook.json").write_text(json.dumps({"S3OutputPath": base}))
    sm_env = {
        **env,
        "TRAINING_JOB_NAME": "lc-sm-path",
        "SMDEBUG_CONFIG_FILE_PATH": str(tmp_path / "hook.json"),
    }
    _train(sm_env, tmp_path, "-")
    desc = _wait_for(env, "lc-sm-path", "Completed")
    assert _verdicts(desc) == {"ExplodingTensor": "NoIssuesFound"}


def test_sagemaker_state_change_event_ends_the_job(local_up, tmp_path: Path) -> None:
    env = local_up
    out = f"s3://{env['TORNASOLE_TRIAL_BUCKET']}/lc-sm-event"
    _register(env, "lc-sm-event", out)
    _train(env, tmp_path, out, how="dies")  # as on SageMaker: no end marker
    time.sleep(2)
    assert _status(env, "lc-sm-event")["TrainingJobStatus"] == "InProgress"
    put = _cli(
        env, "local", "sagemaker-event", "lc-sm-event", "--status", "Failed", "--failure-reason", "OOM"
    )
    assert put.returncode == 0, put.stderr
    desc = _wait_for(env, "lc-sm-event", "Failed")
    assert desc["FailureReason"] == "OOM"
    assert _verdicts(desc) == {"ExplodingTensor": "NoIssuesFound"}


def test_late_registration_completes(local_up, tmp_path: Path) -> None:
    env = local_up
    out = f"s3://{env['TORNASOLE_TRIAL_BUCKET']}/lc-late"
    _train(env, tmp_path, out)
    time.sleep(2)  # the notifications are handled before the job exists
    _register(env, "lc-late", out)
    desc = _wait_for(env, "lc-late", "Completed")
    assert _verdicts(desc) == {"ExplodingTensor": "NoIssuesFound"}
    assert "3 evaluated steps" in desc["DebugRuleEvaluationStatuses"][0]["StatusDetails"]


def test_idle_timeout_ends_a_dead_training(local_up, tmp_path: Path) -> None:
    env = local_up
    out = f"s3://{env['TORNASOLE_TRIAL_BUCKET']}/lc-idle"
    _register(env, "lc-idle", out, "--idle-timeout", "2")
    _train(env, tmp_path, out, how="dies")
    desc = _wait_for(env, "lc-idle", "Failed", timeout=30)
    assert desc["FailureReason"].startswith("IdleTimeout: no new data for")
    assert _verdicts(desc) == {"ExplodingTensor": "Stopped"}


def test_rewrite_of_an_ended_job_is_reported(local_up, tmp_path: Path) -> None:
    env = local_up
    out = f"s3://{env['TORNASOLE_TRIAL_BUCKET']}/lc-rewrite"
    _register(env, "lc-rewrite", out)
    _train(env, tmp_path, out)
    _wait_for(env, "lc-rewrite", "Completed")
    rerun = _train(env, tmp_path, out, value=float("nan"))
    assert "already holds a finished trial" in rerun.stderr
    deadline = time.monotonic() + 30
    while (
        "TornasoleTrialRewritten" not in (desc := _status(env, "lc-rewrite")) and time.monotonic() < deadline
    ):
        time.sleep(0.5)
    assert "written again after the job was Completed" in desc["TornasoleTrialRewritten"]["StatusDetails"]
    text = _cli(env, "jobs", "status", "lc-rewrite")
    assert "warning: the trial was written again after the job was Completed" in text.stdout

"""`tornasole local up` as a user runs it: a busy port is refused at once; --state-dir survives a restart."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from tornasole.aws.clients import clear_client_cache

BIN = Path(sys.executable).parent
TORNASOLE = str(BIN / "tornasole")
RULE = "ExplodingTensor"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("AWS_ENDPOINT_URL", "TORNASOLE_"))}


def test_busy_port_is_refused_at_once_naming_the_port() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        started = time.monotonic()
        out = subprocess.run(
            [TORNASOLE, "local", "up", "--port", str(port)],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert time.monotonic() - started < 20
    assert out.returncode == 2
    assert out.stderr.startswith(f"tornasole: error: port {port} on 127.0.0.1 is already in use")
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "Tornasole local mode listening" not in out.stdout


@contextmanager
def local_up(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[subprocess.Popen]:
    """``local up --state-dir`` in a subprocess; this process's clients point at it while inside."""
    proc = subprocess.Popen(
        [TORNASOLE, "local", "up", "--port", "0", "--state-dir", str(state_dir)],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    exports: dict[str, str] = {}
    deadline = time.monotonic() + 60
    for line in proc.stdout:
        if m := re.match(r"\s+export (\w+)=(.*)$", line):
            exports[m.group(1)] = m.group(2)
        if line.startswith("Ctrl-C to stop") or time.monotonic() > deadline:
            break
    assert "AWS_ENDPOINT_URL" in exports, "local up did not print its environment"
    with monkeypatch.context() as m:
        for k, v in exports.items():
            m.setenv(k, v)
        clear_client_cache()
        try:
            yield proc
        finally:
            clear_client_cache()
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                rest, _ = proc.communicate(timeout=60)
                assert proc.returncode == 0, rest
                assert "local mode stopped" in rest
    clear_client_cache()


def _wait(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_state_dir_keeps_jobs_rule_statuses_and_trials_across_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tornasole.format.writer import StepWriter, TrialWriter
    from tornasole.jobs import describe, register_job, rule_job_summary
    from tornasole.modes import ModeKeys
    from tornasole.storage import get_storage
    from tornasole.trials import create_trial

    state = tmp_path / "state"
    trial = "s3://tornasole-local/kept"
    with local_up(state, monkeypatch):
        register_job(
            "kept",
            trial,
            [
                {
                    "RuleConfigurationName": RULE,
                    "RuleParameters": {"rule_to_invoke": RULE, "action_json": '{"name": "stoptraining"}'},
                }
            ],
        )
        writer = TrialWriter(trial)
        writer.write_collections({"losses": {"name": "losses", "include_regex": ["loss.*"]}}, 1)
        for step, loss in enumerate([1.0, float("nan")]):
            sw = StepWriter(step, "worker_0", mode=ModeKeys.TRAIN, mode_step=step)
            sw.add_tensor("loss", np.float32(loss), wall_time=1.0)
            writer.write_step(sw)
        _wait(lambda: rule_job_summary("kept")[0]["RuleEvaluationStatus"] == "IssuesFound")
        before = describe("kept")
    assert (state / "tornasole-local-state.json").is_file()

    with local_up(state, monkeypatch):
        after = describe("kept")
        assert after["TrainingJobStatus"] == before["TrainingJobStatus"]
        assert after["DebugRuleEvaluationStatuses"] == before["DebugRuleEvaluationStatuses"]
        assert after["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] == "IssuesFound"
        t = create_trial(trial)
        assert t.steps() == [0, 1]
        assert np.isnan(t.tensor("loss").value(1))
        assert get_storage(trial).exists(f"{trial}/tornasole_stop_training.json")
        # Still a live pipeline: a new job registers and evaluates after the restart.
        register_job("new", "s3://tornasole-local/new", [{"RuleConfigurationName": RULE}])
        assert describe("new")["TrainingJobStatus"] == "InProgress"

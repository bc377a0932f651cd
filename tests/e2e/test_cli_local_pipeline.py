"""End to end as a user drives it: `local up`, `jobs register`, a training script, `jobs status`.

Everything runs in subprocesses talking to the local endpoint through the
standard AWS variables that ``local up`` prints; the events are read from an
SQS queue this test subscribes to the bus, and checked against EVENTS.md.
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

import boto3
import pytest

BIN = Path(sys.executable).parent
TRAINING_SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    from torch import nn
    from tornasole import SaveConfig, modes
    from tornasole.pytorch import Hook

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=float(sys.argv[2]))
    hook = Hook(out_dir=sys.argv[1], save_config=SaveConfig(save_interval=2),
                include_collections=["weights", "gradients", "losses"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(modes.TRAIN)
    x, y = torch.randn(64, 8) * 5, torch.randint(0, 3, (64,))
    for step in range(12):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    hook.close()
    """
)


@pytest.fixture
def local_up() -> Iterator[tuple[subprocess.Popen, dict[str, str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    proc = subprocess.Popen(
        [str(BIN / "tornasole"), "local", "up", "--port", "0", "--schedule-seconds", "2"],
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
        yield proc, {**env, **exports}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "tornasole"), *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_local_up_register_train_status_and_events(local_up, tmp_path: Path) -> None:
    proc, env = local_up
    # GIVEN an SQS queue subscribed to the bus with the pattern SageMaker users write (source differs)
    session = boto3.session.Session(
        region_name=env["AWS_DEFAULT_REGION"], aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    sqs = session.client("sqs", endpoint_url=env["AWS_ENDPOINT_URL"])
    events = session.client("events", endpoint_url=env["AWS_ENDPOINT_URL"])
    url = sqs.create_queue(QueueName="e2e-subscriber")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    bus = env["TORNASOLE_EVENT_BUS"]
    pattern = {"source": ["tornasole"], "detail-type": ["SageMaker Training Job State Change"]}
    events.put_rule(Name="e2e", EventBusName=bus, EventPattern=json.dumps(pattern))
    events.put_targets(Rule="e2e", EventBusName=bus, Targets=[{"Id": "q", "Arn": arn}])

    # WHEN a job is registered and a diverging training writes to the local S3
    out = f"s3://{env['TORNASOLE_TRIAL_BUCKET']}/e2e-job"
    reg = _cli(
        env,
        "jobs",
        "register",
        "--name",
        "e2e-job",
        "--s3-output",
        out,
        "--rule",
        "ExplodingTensor",
        "--rule",
        "VanishingGradient",
    )
    assert reg.returncode == 0, reg.stderr
    assert "InProgress" in reg.stdout
    script = tmp_path / "train.py"
    script.write_text(TRAINING_SCRIPT)
    train = subprocess.run(
        [sys.executable, str(script), out, "50.0"], env=env, capture_output=True, text=True, timeout=180
    )
    assert train.returncode == 0, train.stderr

    # THEN jobs status reaches Completed with the right verdicts
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status = _cli(env, "jobs", "status", "e2e-job")
        assert status.returncode == 0, status.stderr
        if "job e2e-job: Completed" in status.stdout:
            break
        time.sleep(1)
    assert "job e2e-job: Completed" in status.stdout, status.stdout
    table, _, advice = status.stdout.partition("\n\nwhat to do:\n")
    rows = {line.split()[0]: line.split()[1] for line in table.splitlines()[3:] if line.strip()}
    assert rows == {"ExplodingTensor": "IssuesFound", "VanishingGradient": "NoIssuesFound"}
    assert advice.startswith("  ExplodingTensor: Likely cause: NaN/Inf in ")  # the firing says what to do

    # AND the subscriber received EVENTS.md-shaped state changes, the last one final
    received = []
    for _ in range(20):
        msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        received += [json.loads(m["Body"]) for m in msgs]
        if any(e["detail"]["TrainingJobStatus"] == "Completed" for e in received):
            break
        time.sleep(0.5)
    assert received, "no event reached the subscriber"
    for e in received:
        assert e["source"] == "tornasole"
        assert e["detail-type"] == "SageMaker Training Job State Change"
        d = e["detail"]
        assert d["TrainingJobName"] == "e2e-job"
        assert re.fullmatch(r"arn:aws:tornasole:us-east-1:\d{12}:training-job/e2e-job", d["TrainingJobArn"])
        assert e["resources"] == [d["TrainingJobArn"]]
        assert d["TrainingJobStatus"] in {"InProgress", "Completed", "Failed", "Stopping", "Stopped"}
        assert d["CreationTime"].isdigit()
        assert d["LastModifiedTime"].isdigit()
        assert d["DebugHookConfig"]["S3OutputPath"] == out
        for s in d["DebugRuleEvaluationStatuses"]:
            assert set(s) >= {
                "RuleConfigurationName",
                "RuleEvaluationJobArn",
                "RuleEvaluationStatus",
                "StatusDetails",
                "LastModifiedTime",
            }
    final = next(e["detail"] for e in received if e["detail"]["TrainingJobStatus"] == "Completed")
    verdicts = {
        s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in final["DebugRuleEvaluationStatuses"]
    }
    assert verdicts == {"ExplodingTensor": "IssuesFound", "VanishingGradient": "NoIssuesFound"}
    assert "TrainingEndTime" in final

    # AND Ctrl-C stops local mode cleanly
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert "local mode stopped" in rest

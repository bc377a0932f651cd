"""Registration mistakes, driven as a user would (subprocesses against the local mode).

A misspelt rule, a bad or unknown parameter, a bucket that does not exist and a saved
``CreateTrainingJob`` request: each gets an exit code, a whole message with what to type
instead, in bounded time, and nothing half-registered.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

TORNASOLE = str(Path(sys.executable).parent / "tornasole")


def run(*args: str, limit: float = 60) -> subprocess.CompletedProcess:
    started = time.monotonic()
    proc = subprocess.run([TORNASOLE, *args], capture_output=True, text=True, timeout=limit)
    assert time.monotonic() - started < limit
    assert "Traceback" not in proc.stderr
    return proc


@pytest.fixture(scope="module")
def local_mode() -> Iterator[object]:
    from tornasole.local import LocalMode, LocalSettings

    with LocalMode(LocalSettings(port=0)) as mode:
        yield mode


@pytest.fixture
def local(local_mode, monkeypatch: pytest.MonkeyPatch) -> object:
    from tornasole.aws.clients import clear_client_cache

    for key, value in local_mode.environment().items():
        monkeypatch.setenv(key, value)
    clear_client_cache()
    return local_mode


def _suggests(stderr: str, name: str) -> bool:
    """A "did you mean" naming ``name`` (quoted or not)."""
    _, said, rest = stderr.partition("did you mean")
    return bool(said) and name in rest


def _not_registered(name: str) -> None:
    proc = run("jobs", "status", name)
    assert proc.returncode == 3, (proc.stdout, proc.stderr)


def test_misspelt_rule_is_refused_with_a_suggestion(local) -> None:
    proc = run(
        "jobs",
        "register",
        "--name",
        "typo",
        "--s3-output",
        f"{local.trial_root}typo",
        "--rule",
        "VanishingGradiant",
    )
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "VanishingGradiant" in proc.stderr
    assert _suggests(proc.stderr, "VanishingGradient"), proc.stderr
    assert "…" not in proc.stderr
    _not_registered("typo")


@pytest.mark.parametrize(
    ("name", "spec", "fragments", "suggestion"),
    [
        ("badparam-value", "LossNotDecreasing:num_steps=twenty", ["num_steps", "twenty"], None),
        ("badparam-name", "LossNotDecreasing:numsteps=3", ["numsteps", "diff_percent"], "num_steps"),
    ],
)
def test_bad_parameter_is_refused_naming_it(
    local, name: str, spec: str, fragments: list[str], suggestion: str | None
) -> None:
    proc = run("jobs", "register", "--name", name, "--s3-output", f"{local.trial_root}{name}", "--rule", spec)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    for fragment in fragments:  # the parameter, and for an unknown one the valid ones
        assert fragment in proc.stderr, (fragment, proc.stderr)
    if suggestion:
        assert _suggests(proc.stderr, suggestion), proc.stderr
    assert "…" not in proc.stderr
    _not_registered(name)


def test_missing_bucket_is_an_error_at_registration(local) -> None:
    proc = run(
        "jobs",
        "register",
        "--name",
        "nobucket",
        "--s3-output",
        "s3://no-such-bucket-here/run",
        "--rule",
        "VanishingGradient",
    )
    assert proc.returncode == 3, (proc.stdout, proc.stderr)  # not found, as `invoke` says a missing bucket
    assert "no-such-bucket-here" in proc.stderr
    _not_registered("nobucket")
    proc = subprocess.run(
        [
            TORNASOLE,
            "invoke",
            "s3://no-such-bucket-here/run",
            "--rule",
            "VanishingGradient",
            "--timeout",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 3, (proc.stdout, proc.stderr)


def test_a_missing_bucket_in_a_request_is_not_found(local, tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(_request("req-nobucket", "s3://no-such-bucket-here/out", "VanishingGradient")))
    proc = run("jobs", "register", "--from-request", str(path))
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert "bucket 'no-such-bucket-here' of job 'req-nobucket' does not exist" in proc.stderr
    _not_registered("req-nobucket")


def test_a_missing_rule_file_is_not_found_in_register_and_invoke(local, tmp_path: Path) -> None:
    missing = str(tmp_path / "my_rule.py")
    proc = run(
        "jobs", "register", "--name", "norule", "--s3-output", f"{local.trial_root}norule",
        "--rule-file", missing, "--rule-class", "MyRule",
    )  # fmt: skip
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert f"--rule-file {missing}: rule file not found" in proc.stderr
    _not_registered("norule")
    trial = tmp_path / "trial"
    from tornasole import Hook

    hook = Hook(out_dir=str(trial))
    hook.save_scalar("loss", 1.0)
    hook.close()
    proc = run("invoke", str(trial), "--rule-file", missing, "--rule", "MyRule")
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert f"--rule-file {missing}: rule file not found" in proc.stderr


def _request(name: str, output: str, rule: str) -> dict:
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": "example/train:latest", "TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::123456789012:role/train",
        "OutputDataConfig": {"S3OutputPath": output},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "DebugHookConfig": {
            "S3OutputPath": output,
            "CollectionConfigurations": [{"CollectionName": "gradients"}],
        },
        "DebugRuleConfigurations": [
            {
                "RuleConfigurationName": rule,
                "RuleEvaluatorImage": "example/rules:latest",
                "RuleParameters": {"rule_to_invoke": rule},
            }
        ],
    }


def test_register_from_a_saved_request(local, tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(_request("from-req", f"{local.trial_root}from-req", "VanishingGradient")))
    proc = run("jobs", "register", "--from-request", str(path))
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "registered from-req" in proc.stdout
    status = run("jobs", "status", "from-req")
    assert status.returncode == 0
    assert "VanishingGradient" in status.stdout


def test_register_from_a_request_with_a_misspelt_rule(local, tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(_request("from-req-typo", f"{local.trial_root}from-req-typo", "DeadRelus")))
    proc = run("jobs", "register", "--from-request", str(path))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert _suggests(proc.stderr, "DeadRelu"), proc.stderr
    _not_registered("from-req-typo")


def test_registering_again_with_other_rules_names_the_cli_flag(local) -> None:
    """The library says "call update_job_rules()"; a CLI user is told the flag: ``--update``."""
    out = f"{local.trial_root}again"
    assert (
        run("jobs", "register", "--name", "again", "--s3-output", out, "--rule", "DeadRelu").returncode == 0
    )
    proc = run("jobs", "register", "--name", "again", "--s3-output", out, "--rule", "AllZero")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "--update" in proc.stderr, proc.stderr
    assert "update_job_rules" not in proc.stderr
    assert "DeadRelu" in proc.stderr  # what it is registered with now
    proc = run("jobs", "register", "--name", "again", "--s3-output", out, "--rule", "AllZero", "--update")
    assert proc.returncode == 0, (proc.stdout, proc.stderr)


def test_register_from_a_request_prints_the_trial_path_it_watches(local, tmp_path: Path) -> None:
    """SageMaker's hook writes under <S3OutputPath>/<job>/debug-output: that is the path to print."""
    output = f"{local.trial_root}sm-out"
    path = tmp_path / "request.json"
    path.write_text(json.dumps(_request("sm-job", output, "VanishingGradient")))
    proc = run("jobs", "register", "--from-request", str(path))
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    trial = f"{output}/sm-job/debug-output"
    first = proc.stdout.splitlines()[0]
    assert first == f"registered sm-job (InProgress) on {trial}", proc.stdout
    assert f"<S3OutputPath>/<TrainingJobName>/debug-output, from {output}" in proc.stdout


def test_a_describe_training_job_output_registers_as_a_request(local, tmp_path: Path) -> None:
    """docs/MIGRATION.md: `aws sagemaker describe-training-job` of an existing job is a usable file."""
    described = _request("described", f"{local.trial_root}described", "VanishingGradient")
    described.update(
        {
            "TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/described",
            "TrainingJobStatus": "InProgress",
            "SecondaryStatus": "Training",
            "CreationTime": "2026-11-28T10:00:00+00:00",
            "DebugRuleEvaluationStatuses": [
                {"RuleConfigurationName": "VanishingGradient", "RuleEvaluationStatus": "InProgress"}
            ],
        }
    )
    path = tmp_path / "described.json"
    path.write_text(json.dumps(described))
    proc = run("jobs", "register", "--from-request", str(path))
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert f"on {local.trial_root}described/described/debug-output" in proc.stdout


def test_a_list_parameter_registers_as_sagemaker_writes_it(local) -> None:
    out = f"{local.trial_root}lists"
    spec = "AllZero:collection_names=weights,gradients,threshold=50"
    proc = run("jobs", "register", "--name", "lists", "--s3-output", out, "--rule", spec)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    desc = json.loads(run("jobs", "status", "lists", "--json").stdout)
    params = desc["DebugRuleConfigurations"][0]["RuleParameters"]
    assert params["collection_names"] == "weights,gradients"
    assert params["threshold"] == "50"
    proc = run(
        "jobs", "register", "--name", "semi", "--s3-output", f"{local.trial_root}semi", "--rule",
        "AllZero:collection_names=weights;gradients",
    )  # fmt: skip
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "collection_names" in proc.stderr
    _not_registered("semi")

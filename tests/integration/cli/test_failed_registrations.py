"""A ``tornasole_job.json`` that cannot be registered is visible in ``jobs list`` and ``jobs status``.

The files are uploaded to the local mode's bucket, as a training script would, and its dispatcher
hands them to the same handler Lambda runs; the CLI then reads what the handler recorded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tornasole.cli.main import main


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


def _upload(local, prefix: str, body: bytes) -> str:
    from tornasole.aws.clients import client

    bucket = local.trial_root[len("s3://") :].rstrip("/")
    client("s3").put_object(Bucket=bucket, Key=f"{prefix}/tornasole_job.json", Body=body)
    assert local.drain(timeout=30)
    return f"{local.trial_root}{prefix}"


def test_unknown_rule_in_a_job_file_is_listed_and_shown_with_its_reason(local, capsys) -> None:
    config = {
        "TrainingJobName": "typo-job",
        "DebugRuleConfigurations": [
            {"RuleConfigurationName": "VG", "RuleParameters": {"rule_to_invoke": "VanishingGradiant"}}
        ],
    }
    trial = _upload(local, "typo-job", json.dumps(config).encode())
    unnamed_trial = _upload(local, "no-name-run", b"{not json")
    capsys.readouterr()

    assert main(["jobs", "list"]) == 0
    listing = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in listing.splitlines() if " Failed " in line}
    assert rows["typo-job"][1:] == ["Failed", "0", "0", trial]
    assert rows["(no"][2:] == ["Failed", "0", "0", unnamed_trial]  # "(no name)": listed by its trial
    reasons = listing.split("failed registrations:\n", 1)[1]
    assert f"  typo-job: {trial}/tornasole_job.json: cannot register the job: " in reasons
    assert "'VanishingGradiant'" in reasons
    assert "did you mean 'VanishingGradient'" in reasons
    assert f"  {unnamed_trial}: {unnamed_trial}/tornasole_job.json: cannot register the job: " in reasons
    assert "not valid JSON" in reasons

    assert main(["jobs", "status", "typo-job"]) == 2  # the file was invalid input
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "job typo-job: Failed"
    assert out[1] == "configuration file: typo-job/tornasole_job.json"
    assert out[2].startswith(f"reason: {trial}/tornasole_job.json: cannot register the job: ")
    assert "did you mean 'VanishingGradient'" in out[2]

    assert main(["jobs", "status", "typo-job", "--json"]) == 2
    desc = json.loads(capsys.readouterr().out)
    assert desc["TrainingJobStatus"] == "Failed"
    assert out[2] == f"reason: {desc['FailureReason']}"

    assert main(["jobs", "status", "never-uploaded"]) == 3  # neither registered nor failed: not found
    assert "no training job named 'never-uploaded'" in capsys.readouterr().err

    # the corrected file registers the job: status shows its rules, list drops the failure
    config["DebugRuleConfigurations"][0]["RuleParameters"]["rule_to_invoke"] = "VanishingGradient"
    _upload(local, "typo-job", json.dumps(config).encode())
    assert main(["jobs", "status", "typo-job"]) == 0
    assert "job typo-job: InProgress" in capsys.readouterr().out
    assert main(["jobs", "list"]) == 0
    listing = capsys.readouterr().out
    assert "typo-job: " not in listing.split("failed registrations:", 1)[-1]

"""CreateTrainingJob requests as the real ``sagemaker`` SDK (2.x) sends them register unchanged.

``tests/fixtures/sagemaker_requests/*.json`` were captured by
``scripts/capture_sdk_requests.py`` running the SDK (2.257.7, smdebug-rulesconfig
1.0.1) in ``.venv-sagemaker``; the ``oracle``-marked test runs that script again
and checks the SDK still sends exactly these requests (collections compared as
a multiset: the SDK keeps them in a set, so their order changes from run to run).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from evaluator_stack import BUCKET, REPO, Stack

from tornasole.aws.clients import client
from tornasole.core.collection_merge import SaveRange
from tornasole.evaluator.registration.job_config import decode_action_json
from tornasole.jobs import TornasoleJobs, describe, register_from_request
from tornasole.rules.actions import Action

FIXTURES = REPO / "tests" / "fixtures" / "sagemaker_requests"
SDK_PYTHON = Path(os.environ.get("TORNASOLE_SAGEMAKER_VENV", REPO / ".venv-sagemaker")) / "bin" / "python"
SDK_IMAGE = "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"


def _request(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def _text(value: Any) -> str:
    return str(value)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.stem)
def test_every_captured_request_registers_as_sent(stack: Stack, path: Path) -> None:
    request = json.loads(path.read_text())
    d = register_from_request(request)
    name = request["TrainingJobName"]
    base = request["DebugHookConfig"]["S3OutputPath"].rstrip("/")
    assert d["TrainingJobName"] == name
    assert d["TrainingJobStatus"] == "InProgress"
    # SageMaker: the trial is <S3OutputPath>/<TrainingJobName>/debug-output; describe echoes the base
    assert TornasoleJobs().table.job_for_trial(f"{base}/{name}/debug-output") == name
    assert d["DebugHookConfig"]["S3OutputPath"] == base
    assert d["ResourceConfig"] == request["ResourceConfig"]
    for sent, kept in zip(request["DebugRuleConfigurations"], d["DebugRuleConfigurations"], strict=True):
        assert kept["RuleConfigurationName"] == sent["RuleConfigurationName"]
        assert kept["RuleEvaluatorImage"] == sent["RuleEvaluatorImage"]
        assert kept["RuleParameters"] == {k: _text(v) for k, v in sent["RuleParameters"].items()}
        for key in ("InstanceType", "VolumeSizeInGB"):
            assert kept.get(key) == sent.get(key)
    statuses = [s["RuleEvaluationStatus"] for s in d["DebugRuleEvaluationStatuses"]]
    assert statuses == ["InProgress"] * len(request["DebugRuleConfigurations"])
    names = {c["CollectionName"] for c in request["DebugHookConfig"]["CollectionConfigurations"]}
    assert [c["CollectionName"] for c in d["DebugHookConfig"]["CollectionConfigurations"]] == sorted(
        names, key=[c["CollectionName"] for c in request["DebugHookConfig"]["CollectionConfigurations"]].index
    )
    assert describe(name) == d


def _mode_range(params: dict[str, str], mode: str) -> SaveRange:
    def get(key: str, default: str | None) -> str | None:
        return params.get(f"{mode}.{key}", params.get(key, default))

    end = get("end_step", None)
    steps = tuple(int(s) for s in (get("save_steps", "") or "").split(",") if s)
    return SaveRange(
        int(get("save_interval", "500")), int(get("start_step", "0")), int(end) if end else None, steps
    )


def test_builtin_rules_actions_and_overlapping_collections(stack: Stack) -> None:
    request = _request("builtin_rules_actions_overlapping_collections")
    d = register_from_request(request)
    rules = {r["RuleConfigurationName"]: r for r in d["DebugRuleConfigurations"]}
    assert list(rules) == ["VanishingGradient", "LossNotDecreasing", "ExplodingTensor"]
    assert {r["RuleEvaluatorImage"] for r in rules.values()} == {SDK_IMAGE}
    # numeric values sent as JSON numbers are kept, as text, on purpose
    loss = rules["LossNotDecreasing"]["RuleParameters"]
    assert (loss["num_steps"], loss["diff_percent"]) == ("20", "0.5")
    # action_json arrives with backslash-escaped quotes: kept as sent, understood as the SDK meant it
    sent = request["DebugRuleConfigurations"][0]["RuleParameters"]["action_json"]
    assert '\\"' in sent
    assert rules["VanishingGradient"]["RuleParameters"]["action_json"] == sent
    assert decode_action_json("VanishingGradient", sent) == (
        Action("stoptraining", training_job_prefix="sdk-builtin-job"),
        Action("email", "mlteam@example.com"),
    )
    # the rules' collections (save_interval 500) and the user's are merged as a union, never "last wins"
    colls = {
        c["CollectionName"]: c["CollectionParameters"]
        for c in d["DebugHookConfig"]["CollectionConfigurations"]
    }
    assert colls["losses"] == {"save_interval": "1", "start_step": "0", "save_steps": ""}
    gradients = {m: _mode_range(colls["gradients"], m) for m in ("train", "eval", "predict", "global")}
    assert gradients["train"] == SaveRange(5)  # the user's train.save_interval 5 holds the rule's 500
    assert gradients["eval"] == SaveRange(10)  # the hook's save_interval 10 holds the rule's 500
    assert d["DebugHookConfig"]["HookParameters"] == {"save_interval": "10"}
    assert d["ResourceConfig"] == {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 50}

    # a short training in the SageMaker-convention trial: the rule fires, the actions run
    trial = f"s3://{BUCKET}/debug/sdk-builtin-job/debug-output"
    stack.write_collections(trial=trial)
    for step in (0, 1, 2):
        stack.write_step(step, grad=1e-9, trial=trial)
    for note in stack.notifications():
        stack.deliver(note)
    stack.pump_stream()
    verdicts = {
        s["RuleConfigurationName"]: s["RuleEvaluationStatus"]
        for s in describe("sdk-builtin-job")["DebugRuleEvaluationStatuses"]
    }
    assert verdicts["VanishingGradient"] == "IssuesFound"
    assert verdicts["ExplodingTensor"] == "InProgress"
    stop = client("s3").get_object(
        Bucket=BUCKET, Key="debug/sdk-builtin-job/debug-output/tornasole_stop_training.json"
    )
    assert json.loads(stop["Body"].read())["TrainingJobName"] == "sdk-builtin-job"
    assert any("mlteam@example.com" in json.dumps(a) for a in stack.alerts())


def test_sdk_defaults_write_under_the_default_bucket(stack: Stack) -> None:
    d = register_from_request(_request("defaults_single_rule"))
    assert d["DebugHookConfig"] == {"S3OutputPath": f"s3://{BUCKET}", "CollectionConfigurations": []}
    assert (
        TornasoleJobs().table.job_for_trial(f"s3://{BUCKET}/sdk-defaults-job/debug-output")
        == "sdk-defaults-job"
    )
    assert d["ResourceConfig"]["VolumeSizeInGB"] == 30


def test_other_trials_and_custom_rules_keep_their_settings(stack: Stack) -> None:
    d = register_from_request(_request("other_trials_and_custom_rule"))
    similar, custom = d["DebugRuleConfigurations"]
    assert similar["RuleParameters"]["other_trial_0"] == f"s3://{BUCKET}/other-run/debug-output"
    assert (custom["InstanceType"], custom["VolumeSizeInGB"]) == ("ml.t3.medium", 30)
    assert custom["RuleEvaluatorImage"].endswith("/my-rules:latest")
    assert custom["RuleParameters"]["threshold"] == "0.5"
    (losses,) = d["DebugHookConfig"]["CollectionConfigurations"]
    # the rule's save_steps 0,1,2 and the user's save_interval 25: every step of both is saved
    assert _mode_range(losses["CollectionParameters"], "train") == SaveRange(25, 0, None, (1, 2))


def _normalised(request: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(request))
    colls = out.get("DebugHookConfig", {}).get("CollectionConfigurations", [])
    colls.sort(key=lambda c: json.dumps(c, sort_keys=True))
    return out


@pytest.mark.oracle
def test_the_sdk_still_sends_the_captured_requests(stack: Stack, tmp_path: Path) -> None:
    if not SDK_PYTHON.exists():
        pytest.fail(f"{SDK_PYTHON} is missing: run `make setup-sagemaker`", pytrace=False)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", PYTHONNOUSERSITE="1")
    subprocess.run(
        [str(SDK_PYTHON), str(REPO / "scripts" / "capture_sdk_requests.py"), str(tmp_path)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        timeout=300,
        check=True,
    )
    live = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    committed = {p.stem: json.loads(p.read_text()) for p in FIXTURES.glob("*.json")}
    assert sorted(live) == sorted(committed)
    for name, request in live.items():
        assert _normalised(request) == _normalised(committed[name]), name
        assert register_from_request(request)["TrainingJobName"] == request["TrainingJobName"]

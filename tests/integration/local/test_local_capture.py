"""Capture on demand end to end in local mode (the Lambda handlers on moto): a rule with a ``capture`` action
fires, the evaluator writes the request next to the job's output, the hook in this process sees it and the
next N training steps hold full tensors; the job's status says where they are."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import numpy as np
import pytest

from tornasole import Hook, SaveConfig, modes
from tornasole.aws.clients import client
from tornasole.format.capture_request import CaptureRequest, capture_request_file_name
from tornasole.jobs import register_job, rule_job_summary
from tornasole.local import LocalMode, LocalSettings
from tornasole.trials import create_trial

RULE = "ExplodingTensor"
STEPS = 3


@pytest.fixture
def local() -> Iterator[LocalMode]:
    with LocalMode(LocalSettings(port=0)) as mode:
        yield mode


def register(local: LocalMode, job: str) -> str:
    action = json.dumps([{"name": "capture", "steps": str(STEPS), "collections": "weights"}])
    trial = f"{local.trial_root}{job}"
    params = {"rule_to_invoke": RULE, "collection_names": "losses", "action_json": action}
    register_job(job, trial, [{"RuleConfigurationName": RULE, "RuleParameters": params}])
    return trial


def test_a_firing_rule_gets_full_tensors_of_the_next_steps_from_the_hook(local: LocalMode) -> None:
    trial = register(local, "capturing")
    other = register(local, "bystander")  # another job's hook must never see this job's request
    hook = Hook(
        trial,
        save_config=SaveConfig(save_interval=1000),
        include_collections=["weights"],
        stop_check_interval=None,
        capture_check_interval=0.1,
    )
    hook.get_collection("losses").save_config = SaveConfig(save_interval=1)
    bystander = Hook(other, save_config=SaveConfig(save_interval=1000), capture_check_interval=0.1)
    hook.set_mode(modes.TRAIN)

    def step(i: int) -> None:
        hook.save_tensor("loss", np.float32("nan" if i == 3 else 1.0 / (i + 1)), "losses")
        hook.save_tensor("fc.weight", np.full(4, i, dtype=np.float32), "weights")
        hook.next_step()

    for i in range(5):
        step(i)
    hook.flush()  # steps 0-3 are in S3; step 3's NaN loss makes the rule fire
    deadline = time.monotonic() + 90
    while not hook._capture_poller.has_pending:
        assert time.monotonic() < deadline, "the capture request never reached the hook"
        time.sleep(0.05)
    for i in range(5, 12):
        step(i)
    hook.close()
    bystander.close()
    assert local.drain(timeout=60)

    # the request the evaluator wrote, where the stop signal would be
    key = f"capturing/{capture_request_file_name(RULE)}"
    body = client("s3").get_object(Bucket=local.settings.bucket, Key=key)["Body"].read()
    request = CaptureRequest.decode(body, key)
    assert (request.rule, request.job, request.step, request.steps) == (RULE, "capturing", 3, STEPS)
    assert request.collections == ("weights",)

    # the hook saved full weights at step 0 (its save config) and at the three steps after it saw the request
    captured = hook._capture_window.captured_steps
    assert captured == [6, 7, 8]  # step 5 was open when the request came: it applies from step 6
    t = create_trial(trial)
    assert t.tensor("fc.weight").steps() == [0, *captured]
    for s in captured:
        np.testing.assert_array_equal(t.tensor("fc.weight").value(s), np.full(4, s, dtype=np.float32))
    assert not bystander._capture_window.served

    # the person who looks learns that it asked and where the evidence is
    (status,) = rule_job_summary("capturing")
    assert status["RuleEvaluationStatus"] == "IssuesFound"
    assert f"at its next {STEPS} training steps" in status["StatusDetails"]
    assert capture_request_file_name(RULE) in status["StatusDetails"]
    assert local.dispatcher is not None
    assert local.dispatcher.errors == []

"""Capture the ``CreateTrainingJob`` requests the real ``sagemaker`` SDK (2.x) sends, without a network.

Run in the SDK's own venv (``make setup-sagemaker``)::

    .venv-sagemaker/bin/python scripts/capture_sdk_requests.py [OUT_DIR]

With ``OUT_DIR`` (``tests/fixtures/sagemaker_requests``) each scenario is written
to ``OUT_DIR/<scenario>.json``; without it, one JSON object
``{scenario: request}`` goes to stdout (what the live test reads).

Why this way: Tornasole's registration must accept exactly what a user's
``Estimator(rules=..., debugger_hook_config=...)`` code sends, and the only
faithful source of that payload is the SDK itself (it merges the rules'
collections with the user's, serialises actions, fills defaults). Each
scenario builds a real ``Estimator`` and calls ``fit(wait=False)``; the
SageMaker client is a real botocore client with a ``Stubber`` attached, so
botocore validates the request against the service model and answers it
locally (its client-side parameter validation is off, see ``_session``), and a
``provide-client-params`` hook records the parameters exactly
as the SDK passed them. Nothing leaves the process.

Requests are plain JSON (a CreateTrainingJob request holds no datetimes). The
SDK collects the rules' and the user's collections in a set, so the order of
``DebugHookConfig.CollectionConfigurations`` changes from run to run; compare
them as a multiset.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.stub import Stubber  # noqa: E402
from sagemaker.debugger import (  # noqa: E402
    CollectionConfig,
    DebuggerHookConfig,
    ProfilerConfig,
    ProfilerRule,
    Rule,
    rule_configs,
)
from sagemaker.estimator import Estimator  # noqa: E402
from sagemaker.session import Session  # noqa: E402
from sagemaker.telemetry import telemetry_logging  # noqa: E402

_TELEMETRY_CALLS: list[str] = []


def _no_network(url: str, timeout: Any) -> None:
    _TELEMETRY_CALLS.append(url)  # the SDK swallows errors here, so record and fail at the end


telemetry_logging._requests_helper = _no_network  # belt and braces behind TelemetryOptOut

BUCKET = "tornasole-trials"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-training:latest"


def _session(captured: list[dict[str, Any]]) -> tuple[Session, Stubber]:
    boto_session = boto3.Session(region_name="us-east-1")
    # parameter_validation off: the SDK passes numeric rule parameters through as numbers, which
    # botocore's client-side validation would refuse before the request is built; we record what
    # the SDK hands to the client, exactly.
    sm = boto_session.client("sagemaker", config=Config(parameter_validation=False))

    def record(params: dict[str, Any], **_: Any) -> None:
        captured.append(json.loads(json.dumps(params)))

    sm.meta.events.register("provide-client-params.sagemaker.CreateTrainingJob", record)
    stubber = Stubber(sm)
    session = Session(
        boto_session=boto_session,
        sagemaker_client=sm,
        default_bucket=BUCKET,
        # the SDK's usage telemetry is an HTTP GET per call: opted out, nothing leaves the process
        sagemaker_config={
            "SchemaVersion": "1.0",
            "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}},
        },
    )
    session._default_bucket = BUCKET  # no CreateBucket/HeadBucket round trip
    return session, stubber


def _fit(name: str, **estimator_args: Any) -> dict[str, Any]:
    captured: list[dict[str, Any]] = []
    session, stubber = _session(captured)
    stubber.add_response(
        "create_training_job",
        {"TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}"},
    )
    estimator = Estimator(
        image_uri=IMAGE,
        role=ROLE,
        instance_count=1,
        sagemaker_session=session,
        **estimator_args,
    )
    with stubber:
        estimator.fit(job_name=name, wait=False, logs=False)
    stubber.assert_no_pending_responses()
    (request,) = captured
    return request


def scenarios() -> dict[str, dict[str, Any]]:
    """Each scenario: a realistic use of the SDK's debugger surface."""
    out: dict[str, dict[str, Any]] = {}
    actions = rule_configs.ActionList(rule_configs.StopTraining(), rule_configs.Email("mlteam@example.com"))
    # 1. Built-in rules with numeric parameters and actions; the user's collections overlap the rules'.
    out["builtin_rules_actions_overlapping_collections"] = _fit(
        "sdk-builtin-job",
        instance_type="ml.m5.xlarge",
        volume_size=50,
        output_path=f"s3://{BUCKET}/model-output",
        rules=[
            Rule.sagemaker(rule_configs.vanishing_gradient(), actions=actions),
            Rule.sagemaker(
                rule_configs.loss_not_decreasing(),
                rule_parameters={"num_steps": 20, "diff_percent": 0.5},
                actions=actions,
            ),
            Rule.sagemaker(rule_configs.exploding_tensor()),
        ],
        debugger_hook_config=DebuggerHookConfig(
            s3_output_path=f"s3://{BUCKET}/debug",
            hook_parameters={"save_interval": "10"},
            collection_configs=[
                CollectionConfig(name="losses", parameters={"save_interval": "1"}),
                CollectionConfig(name="gradients", parameters={"train.save_interval": "5"}),
            ],
        ),
    )
    # 2. The SDK's defaults: no hook config given (the SDK makes one on the default bucket).
    out["defaults_single_rule"] = _fit(
        "sdk-defaults-job",
        instance_type="ml.c5.2xlarge",
        rules=[Rule.sagemaker(rule_configs.overfit())],
    )
    # 3. A rule comparing against another run, and a custom rule with its own source and image.
    out["other_trials_and_custom_rule"] = _fit(
        "sdk-custom-job",
        instance_type="ml.g4dn.xlarge",
        volume_size=100,
        rules=[
            Rule.sagemaker(
                rule_configs.similar_across_runs(),
                other_trials_s3_input_paths=[f"s3://{BUCKET}/other-run/debug-output"],
            ),
            Rule.custom(
                name="LossAbove",
                image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/my-rules:latest",
                instance_type="ml.t3.medium",
                volume_size_in_gb=30,
                source=f"s3://{BUCKET}/rules/loss_above.py",
                rule_to_invoke="LossAbove",
                rule_parameters={"threshold": 0.5},
                collections_to_save=[CollectionConfig(name="losses", parameters={"save_steps": "0,1,2"})],
                actions=rule_configs.StopTraining(),
            ),
        ],
        debugger_hook_config=DebuggerHookConfig(
            s3_output_path=f"s3://{BUCKET}/custom",
            collection_configs=[CollectionConfig(name="losses", parameters={"save_interval": "25"})],
        ),
    )
    # 4. Profiler rules (ProfilerRuleConfigurations) and the profiler's settings (ProfilerConfig) beside a
    #    tensor rule: ProfilerReport with a customised sub-rule parameter, and one rule on its own.
    out["profiler_rules_and_config"] = _fit(
        "sdk-profiler-job",
        instance_type="ml.g4dn.xlarge",
        rules=[
            Rule.sagemaker(rule_configs.loss_not_decreasing()),
            ProfilerRule.sagemaker(rule_configs.ProfilerReport(CPUBottleneck_threshold=30)),
            ProfilerRule.sagemaker(rule_configs.LowGPUUtilization(threshold_p95=60, window=200)),
        ],
        profiler_config=ProfilerConfig(system_monitor_interval_millis=500),
    )
    return out


def main(argv: list[str]) -> int:
    captured = scenarios()
    if _TELEMETRY_CALLS:
        raise SystemExit(f"the SDK tried to reach the network: {_TELEMETRY_CALLS}")
    if len(argv) > 1:
        os.makedirs(argv[1], exist_ok=True)
        for name, request in captured.items():
            with open(os.path.join(argv[1], f"{name}.json"), "w", encoding="utf-8") as fh:
                fh.write(json.dumps(request, indent=2, sort_keys=True) + "\n")
    else:
        print(json.dumps(captured, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

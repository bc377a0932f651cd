"""CDK fixtures: each synthesizes once per session, with a tiny stub layer (no 60 MB asset to hash)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # `infra` is the CDK app's package at the repo root
    sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402

from infra.config import StackConfig  # noqa: E402
from infra.constructs.evaluator import LAYER_MARKER  # noqa: E402
from infra.nag import acknowledge_findings, add_nag_checks  # noqa: E402
from infra.stack import TornasoleStack  # noqa: E402

# The context a user would pass with --context, exercising every optional feature.
FULL_CONTEXT: dict[str, Any] = {
    "alert_emails": "ops@example.com,ml@example.com",
    "alert_lambda_arn": "arn:aws:lambda:us-east-1:123456789012:function:my-alarm-handler",
    "trial_expiration_days": "30",
    "reserved_concurrency": "20",
    "lambda_memory_mb": "2048",
}
# The other shape: an imported bucket, arm64, custom rules in another bucket, no alarms.
IMPORTED_CONTEXT: dict[str, Any] = {
    "existing_bucket_name": "my-training-output",
    "trial_prefix": "debug",
    "lambda_architecture": "arm64",
    "custom_rules_prefix": "s3://my-rules-bucket/tornasole/rules",
    "alarms": "false",
    "event_bus_name": "ml-events",
    "event_source": "acme.tornasole",
    "log_retention_days": 90,
    "removal_policy": "destroy",
}


@dataclass(frozen=True)
class Synth:
    stack: TornasoleStack
    template: Template
    outdir: Path

    @property
    def json(self) -> dict[str, Any]:
        return self.template.to_json()

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return self.template.find_resources(type_)


def stub_layer(root: Path, arch: str) -> Path:
    """What scripts/build_layer.sh leaves behind, minus the wheels."""
    layer = root / f"layer-{arch}"
    (layer / "python" / "tornasole").mkdir(parents=True)
    (layer / "python" / "tornasole" / "__init__.py").write_text("")
    (layer / LAYER_MARKER).write_text(f"arch={arch}\npython=3.12\n")
    return layer


def synthesize(tmp: Path, context: dict[str, Any]) -> Synth:
    """One App exactly as app.py builds it (cdk-nag included), synthesized once."""
    config = StackConfig.from_mapping(context)
    outdir = tmp / "cdk.out"
    app = cdk.App(outdir=str(outdir), context={"aws:cdk:bundling-stacks": []})
    stack = TornasoleStack(
        app, config.stack_name, config=config, layer_dir=stub_layer(tmp, config.lambda_architecture)
    )
    add_nag_checks(app)
    acknowledge_findings(stack)
    assembly = app.synth()  # raises RuntimeError("ValidationFailed ...") on an unacknowledged nag error
    artifact = assembly.get_stack_artifact(stack.artifact_id)
    template = Template.from_json(json.loads(Path(artifact.template_full_path).read_text()))
    return Synth(stack, template, outdir)


@pytest.fixture(scope="session")
def full_context() -> dict[str, Any]:
    return dict(FULL_CONTEXT)


@pytest.fixture(scope="session")
def imported_context() -> dict[str, Any]:
    return dict(IMPORTED_CONTEXT)


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("full"), FULL_CONTEXT)


@pytest.fixture(scope="session")
def without_flow_log(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The full stack with ``sandbox_flow_log=false``, as the MiniStack deploy test synthesises it."""
    return synthesize(tmp_path_factory.mktemp("no-flow-log"), {**FULL_CONTEXT, "sandbox_flow_log": "false"})


# Alert destinations of every kind (docs/ALERTS.md): a webhook with its URL, a Slack incoming webhook
# whose URL is in the secret, an AWS Chatbot Slack channel and a Teams channel.
ALERT_DESTINATIONS_CONTEXT: dict[str, Any] = {
    "alert_webhooks": json.dumps(
        {
            "oncall": {
                "url": "https://events.example.com/v2/enqueue",
                "secret_arn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:tornasole/oncall-AbCdEf",
            },
            "slack-hook": {
                "url_in_secret": True,
                "secret_arn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:tornasole/slack-AbCdEf",
                "header": "X-Tornasole-Token",
                "format": "slack",
            },
        }
    ),
    "alert_slack_channels": json.dumps({"ml-team": {"workspace_id": "T0123ABCD", "channel_id": "C0123ABCD"}}),
    "alert_teams_channels": json.dumps(
        {
            "ops": {
                "tenant_id": "11111111-2222-3333-4444-555555555555",
                "team_id": "66666666-7777-8888-9999-000000000000",
                "channel_id": "19%3a0123abcd%40thread.tacv2",
            }
        }
    ),
}


@pytest.fixture(scope="session")
def with_alert_destinations(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The full stack with one alert destination of every kind."""
    return synthesize(tmp_path_factory.mktemp("destinations"), {**FULL_CONTEXT, **ALERT_DESTINATIONS_CONTEXT})


@pytest.fixture(scope="session")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("imported"), IMPORTED_CONTEXT)

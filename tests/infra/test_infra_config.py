"""Context validation: defaults from stack_spec, and bad values stop synthesis naming the --context key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest

from infra.config import ConfigError, StackConfig
from tornasole.stack_spec import DEFAULT_SPEC

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_defaults_come_from_the_stack_spec() -> None:
    cfg = StackConfig.from_context(cdk.App().node)
    assert cfg.event_bus_name == DEFAULT_SPEC.bus.name
    assert cfg.event_source == DEFAULT_SPEC.bus.source
    assert cfg.state_table_name == DEFAULT_SPEC.table.name
    assert cfg.lambda_architecture == "x86_64"
    assert cfg.layer_path == Path("build/layer/x86_64")


def test_cdk_json_context_is_valid() -> None:
    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    cfg = StackConfig.from_context(cdk.App(context=context).node)
    assert cfg.trial_prefix == "trials/"
    assert cfg.alert_emails == ()
    assert (cfg.alert_webhooks, cfg.alert_slack_channels, cfg.alert_teams_channels) == ((), (), ())


def test_command_line_strings_are_parsed() -> None:
    cfg = StackConfig.from_mapping(
        {
            "alert_emails": "a@example.com, b@example.org",
            "lambda_memory_mb": "3008",
            "lambda_architecture": "aarch64",
            "trial_prefix": "/runs",
            "alarms": "false",
            "custom_rules_prefix": "s3://rules-bucket/team/rules",
        }
    )
    assert cfg.alert_emails == ("a@example.com", "b@example.org")
    assert cfg.lambda_memory_mb == 3008
    assert cfg.lambda_architecture == "arm64"
    assert cfg.trial_prefix == "runs/"
    assert cfg.alarms is False
    assert cfg.custom_rules_location == ("rules-bucket", "team/rules/")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("lambda_architecture", "sparc"),
        ("alert_emails", "ops@example.com,not-an-address"),
        ("bucket_name", "My_Bucket"),
        ("bucket_name", "192.168.1.1"),
        ("existing_bucket_name", "a..b"),
        ("lambda_memory_mb", "64"),
        ("lambda_memory_mb", "lots"),
        ("log_retention_days", "31"),
        ("removal_policy", "snapshot"),
        ("event_source", "aws.sagemaker"),
        ("alert_lambda_arn", "my-function"),
        ("custom_rules_prefix", "s3://Bad_Bucket/rules"),
        ("trial_prefix", "trials with spaces/"),
    ],
)
def test_bad_values_name_the_context_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"--context {key}="):
        StackConfig.from_mapping({key: value})


def test_create_and_import_are_exclusive() -> None:
    with pytest.raises(ConfigError, match="bucket_name and existing_bucket_name"):
        StackConfig.from_mapping({"bucket_name": "mine", "existing_bucket_name": "theirs"})


def test_app_py_stops_before_synthesis_on_a_bad_value(tmp_path: Path) -> None:
    # GIVEN `cdk synth --context lambda_architecture=sparc` (the CLI passes context via CDK_CONTEXT_JSON)
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps({"lambda_architecture": "sparc"}),
        "CDK_OUTDIR": str(tmp_path),
    }
    # WHEN app.py runs THEN it fails with one line naming the key, and writes no template
    proc = subprocess.run(
        [sys.executable, "app.py"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode != 0
    assert "invalid --context lambda_architecture='sparc': expected x86_64 or arm64" in proc.stderr
    assert not list(tmp_path.glob("*.template.json"))

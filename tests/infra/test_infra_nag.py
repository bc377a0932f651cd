"""cdk-nag (AwsSolutions + Serverless) runs on every synth and finds no unacknowledged error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3

from infra.nag import add_nag_checks


def _errors(outdir) -> list[str]:
    report = outdir / "validation-report.json"
    if not report.exists():  # cdk writes the report only when a plugin reported something
        return []
    data = json.loads(report.read_text())
    return [
        v["ruleName"]
        for p in data.get("pluginReports", [])
        for v in p.get("violations", [])
        if v.get("severity", "").lower() == "error"
    ]


def test_stack_has_no_unacknowledged_nag_error(synth, imported) -> None:
    # GIVEN both shapes were synthesized with the packs (synth raises on an unacknowledged error)
    # THEN no error-level violation was reported
    assert _errors(synth.outdir) == []
    assert _errors(imported.outdir) == []


def test_every_acknowledgement_has_a_reason(synth) -> None:
    acknowledged = 0
    for construct in synth.stack.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                for rule, reason in entry.data.items():
                    acknowledged += 1
                    assert len(reason) > 40, (rule, reason)
    assert acknowledged > 0


def test_the_packs_really_run(tmp_path) -> None:
    # GIVEN a bucket with none of the protections, under the same plugins
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Naked")
    s3.Bucket(stack, "Open")
    add_nag_checks(app)
    # WHEN it is synthesized THEN synthesis fails, naming the AwsSolutions rule
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    assert "AwsSolutions-S10" in _errors(tmp_path)


def test_template_passes_cfn_lint(synth, tmp_path) -> None:
    template = tmp_path / "Tornasole.template.json"
    template.write_text(json.dumps(synth.json))
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    # W3005: the redundant DependsOn CDK itself generates
    command = [str(cfn_lint), str(template), "--ignore-checks", "W3005"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr

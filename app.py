#!/usr/bin/env python3
"""The Tornasole CDK app: context -> StackConfig -> TornasoleStack (+ cdk-nag) -> cloud assembly.

Pure and offline: no AWS calls, no Docker. The layer asset is prebuilt by `make layer`.
"""

import os
import sys

import aws_cdk as cdk

from infra.config import ConfigError, StackConfig
from infra.nag import acknowledge_findings, add_nag_checks
from infra.stack import TornasoleStack

app = cdk.App(outdir=os.environ.get("CDK_OUTDIR", "cdk.out"))
try:
    config = StackConfig.from_context(app.node)
    stack = TornasoleStack(app, config.stack_name, config=config, description="Tornasole evaluator")
except ConfigError as err:  # a bad --context value or a missing/mismatched layer build
    sys.exit(f"tornasole synth: {err}")
add_nag_checks(app)
acknowledge_findings(stack)
app.synth()

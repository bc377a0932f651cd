"""Rules over S3 (moto server): a custom smdebug rule file and a trial both under s3://."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from tornasole.exceptions import RuleLoadError
from tornasole.format.writer import TrialWriter
from tornasole.rules import invoke_rule
from tornasole.rules.loader import create_custom_rule
from tornasole.rules.rule_invoker import main
from tornasole.storage import get_storage
from tornasole.trials import create_trial

RULE = textwrap.dedent(
    """
    from smdebug.rules import Rule
    from smdebug.exceptions import *


    class VanishingGradientRule(Rule):
        def __init__(self, base_trial, threshold=0.0000001):
            super().__init__(base_trial)
            self.threshold = float(threshold)

        def set_required_tensors(self, step):
            for tname in self.base_trial.tensor_names(collection="gradients"):
                self.req_tensors.add(tname, steps=[step])

        def invoke_at_step(self, step):
            for tensor in self.req_tensors.get():
                abs_mean = tensor.reduction_value(step, "mean", abs=True)
                if abs_mean < self.threshold:
                    return True
                else:
                    return False
    """
)


@pytest.fixture
def s3_run(s3_bucket):
    base = f"s3://{s3_bucket}"
    tw = TrialWriter(f"{base}/run")
    tw.write_collections(
        {
            "gradients": {
                "name": "gradients",
                "include_regex": ["^gradients/"],
                "tensor_names": [],
                "reduction_config": None,
                "save_config": None,
                "save_histogram": True,
            }
        },
        1,
    )
    for step in range(5):
        sw = tw.step_writer(step)
        sw.add_tensor("gradients/w", np.full(4, 1e-9 if step >= 2 else 1e-3, np.float32))
        tw.write_step(sw)
    tw.write_end_marker()
    get_storage(base).write_atomic(f"{base}/rules/vg.py", RULE.encode())
    return base


def test_custom_rule_from_s3_runs_on_an_s3_trial(s3_run):
    trial = create_trial(f"{s3_run}/run")
    rule = create_custom_rule(f"{s3_run}/rules/vg.py", "VanishingGradientRule", trial, threshold="0.0001")
    summary = invoke_rule(rule, start_step=0, end_step=None)
    assert summary.first_step == 2
    assert summary.fired_steps == [2, 3, 4]


def test_cli_with_s3_rule_file(s3_run, capsys):
    code = main(
        [
            "--trial-dir",
            f"{s3_run}/run",
            "--rule-name",
            "VanishingGradientRule",
            "--rule-file",
            f"{s3_run}/rules/vg.py",
            "--threshold",
            "0.0001",
        ]
    )
    assert code == 1
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith(
            "RESULT rule=VanishingGradientRule status=IssuesFound first_step=2 fired_steps=2,3,4 "
            "steps_evaluated=5 steps_skipped=0"
        )
    )


def test_missing_s3_rule_file_names_it(s3_run):
    trial = create_trial(f"{s3_run}/run")
    with pytest.raises(RuleLoadError, match=rf"{s3_run}/rules/absent.py: rule file not found"):
        create_custom_rule(f"{s3_run}/rules/absent.py", "R", trial)

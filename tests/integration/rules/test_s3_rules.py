"""Rules over S3 (moto server): a custom smdebug rule file and a trial both under s3://."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from tornasole.exceptions import RuleLoadError
from tornasole.format.writer import TrialWriter
from tornasole.rules import Rule, invoke_rule
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


def _gradients_collection(**extra):
    """The collections file of a run saving ``gradients/*`` (``extra``: more fields of the collection)."""
    return {
        "gradients": {
            "name": "gradients",
            "include_regex": ["^gradients/"],
            "tensor_names": [],
            "reduction_config": None,
            "save_config": None,
            **extra,
        }
    }


@pytest.fixture
def s3_run(s3_bucket):
    base = f"s3://{s3_bucket}"
    tw = TrialWriter(f"{base}/run")
    tw.write_collections(_gradients_collection(save_histogram=True), 1)
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


class _AllGradients(Rule):
    """Requires every gradient at the step; fires on none (what a rule job reads, nothing more)."""

    def set_required_tensors(self, step):
        for name in self.base_trial.tensor_names(collection="gradients"):
            self.req_tensors.add(name, steps=[step])

    def invoke_at_step(self, step):
        return False


@pytest.fixture
def s3_ten_steps(s3_bucket):
    path = f"s3://{s3_bucket}/ten"
    tw = TrialWriter(path)
    tw.write_collections(_gradients_collection(), 1)
    for step in range(10):
        sw = tw.step_writer(step)
        for layer in ("a", "b", "c"):
            sw.add_tensor(f"gradients/{layer}", np.full(4, step, np.float32))
        tw.write_step(sw)
    tw.write_end_marker()
    return path


def _event_file_batches(monkeypatch) -> list[list[str]]:
    """The event files of each ``read_many`` batch an S3 trial makes (a spy on the real storage)."""
    from tornasole.storage.s3 import S3Storage

    batches: list[list[str]] = []
    real = S3Storage.read_many

    def read_many(self, requests, on_error="raise"):
        files = [r.path for r in requests if "/events/" in r.path]
        if files:
            batches.append(files)
        return real(self, requests, on_error)

    monkeypatch.setattr(S3Storage, "read_many", read_many)
    return batches


@pytest.mark.parametrize(
    ("window", "expected"), [(64, [range(10)]), (3, [range(4), range(4, 8), range(8, 10)])]
)
def test_a_rule_over_s3_reads_each_window_of_steps_in_one_batch_the_first_step_included(
    s3_ten_steps, monkeypatch, window, expected
):
    """The look-ahead prefetches from the step whose requirements it has just learnt, so the first
    step is not fetched alone before the window: one round of reads per window, each file once."""
    from tornasole.rules import step_loop

    monkeypatch.setattr(step_loop._LookAhead, "WINDOW", window)
    batches = _event_file_batches(monkeypatch)
    rule = _AllGradients(create_trial(s3_ten_steps))
    summary = invoke_rule(rule, start_step=0, end_step=None)
    assert summary.steps_evaluated == 10
    steps = [sorted(int(f.rsplit("/", 2)[-2]) for f in batch) for batch in batches]
    assert steps == [list(r) for r in expected]

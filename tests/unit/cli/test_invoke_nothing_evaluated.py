"""``tornasole invoke`` on a rule that finds nothing to read says so: ``NothingEvaluated``, not assurance.

Before: a ``tensor_regex`` or ``collection_names`` matching nothing, or DeadRelu on a trial without ReLU
outputs, printed ``status=NoIssuesFound ... steps_evaluated=5`` and exited 0, while the evaluator called
the same trial ``NothingEvaluated``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tornasole import Hook, SaveConfig
from tornasole.cli.main import main
from tornasole.rules.rule_invoker import main as rule_invoker_main


def _trial(path: Path) -> str:
    """Five saved steps of gradients and a loss: no ReLU outputs, nothing named ``x/...``."""
    hook = Hook(out_dir=str(path), save_config=SaveConfig(save_interval=10))
    for step in range(50):
        hook.save_tensor("gradients/w", np.full(4, 1e-2, np.float32), "gradients")
        hook.save_tensor("loss", np.float32(1.0 / (step + 1)), "losses")
        hook.next_step()
    hook.close()
    return str(path)


@pytest.mark.parametrize(
    ("rule", "needs"),
    [
        ("AllZero:tensor_regex=x/.*", "it reads tensors matching tensor_regex 'x/.*'"),
        ("AllZero:collection_names=relu_output", "it reads the collections relu_output"),
        ("DeadRelu", "it reads ReLU outputs (tensors matching '.*relu_output')"),
    ],
)
def test_a_rule_that_reads_nothing_is_nothing_evaluated(
    tmp_path: Path, capsys, rule: str, needs: str
) -> None:
    trial = _trial(tmp_path / "run")
    assert main(["invoke", trial, "--rule", rule]) == 0  # not an issue: exit 0
    lines = capsys.readouterr().out.strip().splitlines()
    name = rule.split(":")[0]
    assert lines[-1] == (
        f"RESULT rule={name} status=NothingEvaluated first_step=none fired_steps=none "
        "steps_evaluated=0 steps_skipped=5"
    )
    assert lines[-2].startswith(f"NothingEvaluated: {name} evaluated 0 of 5 steps: {needs}")
    assert "to save it:" in lines[-2]


def test_rule_invoker_gives_the_same_verdict(tmp_path: Path, capsys) -> None:
    trial = _trial(tmp_path / "run")
    assert rule_invoker_main(["--trial-dir", trial, "--rule-name", "AllZero", "--tensor_regex", "x/.*"]) == 0
    assert "status=NothingEvaluated" in capsys.readouterr().out.strip().splitlines()[-1]


def test_a_rule_that_reads_its_tensors_is_still_no_issues_found(tmp_path: Path, capsys) -> None:
    trial = _trial(tmp_path / "run")
    assert main(["invoke", trial, "--rule", "AllZero:collection_names=gradients"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == (
        "RESULT rule=AllZero status=NoIssuesFound first_step=none fired_steps=none "
        "steps_evaluated=5 steps_skipped=0"
    )

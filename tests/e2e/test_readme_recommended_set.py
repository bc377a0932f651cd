"""The README's healthy example, registered with the recommended set, ends with no rule in Error and
``jobs status --fail-on-issues`` exits 0 (issue #28, finding 4).

Before: 7 of the 12 recommended rules read tensors the example does not save and ended ``Error``
(``NothingEvaluated: ...``), so a newcomer's first healthy run failed ``--fail-on-issues``. They now end
``NothingEvaluated`` (RuleEvaluationStatus ``NoIssuesFound``) and say what they read and how to save it.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from tornasole.cli.main import main

README = Path(__file__).resolve().parents[2] / "README.md"


def _training_block() -> str:
    """The README's first Python block: the instrumented PyTorch script, saving to the ``OUT`` the test gives
    (the block's own ``OUT = ...`` line, a local directory for a reader to paste, is taken out)."""
    block = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)[0]
    block, n = re.subn(r"^OUT = .*$", "", block, count=1, flags=re.M)
    assert n == 1, "the README's first block no longer assigns OUT on a line of its own"
    return block


def test_the_readme_example_with_the_recommended_set_has_no_error(capsys) -> None:
    from tornasole.jobs import describe, register_job
    from tornasole.local import LocalMode, LocalSettings
    from tornasole.rules import recommended_rules

    with LocalMode(LocalSettings(port=0, schedule_seconds=10)) as local:
        assert local.dispatcher is not None
        out = f"{local.trial_root}readme-job"
        register_job("readme-job", out)  # no rules named: the recommended set
        exec(compile(_training_block(), "README.md", "exec"), {"OUT": out})  # noqa: S102 - the README's code
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            local.drain(timeout=5)
            if describe("readme-job")["TrainingJobStatus"] != "InProgress":
                break
            local.dispatcher.run_scheduled_check()
        desc = describe("readme-job")
        assert desc["TrainingJobStatus"] == "Completed"
        statuses = {s["RuleConfigurationName"]: s for s in desc["DebugRuleEvaluationStatuses"]}
        assert sorted(statuses) == sorted(r["RuleConfigurationName"] for r in recommended_rules())
        assert {n: s["RuleEvaluationStatus"] for n, s in statuses.items()} == dict.fromkeys(
            statuses, "NoIssuesFound"
        )
        nothing = sorted(
            n for n, s in statuses.items() if s["StatusDetails"].startswith("NothingEvaluated: ")
        )
        assert nothing, "the example saves no activations, accuracy or validation pass"
        for name in nothing:  # each says what it reads and how to save it
            assert "it reads " in statuses[name]["StatusDetails"], statuses[name]
            assert "to save it: " in statuses[name]["StatusDetails"], statuses[name]
        capsys.readouterr()
        assert main(["jobs", "status", "readme-job", "--fail-on-issues"]) == 0
        table = capsys.readouterr().out
        assert "Error" not in table
        assert table.count("NothingEvaluated") >= len(nothing)
        assert not local.dispatcher.errors
        # offline, the same trial gets the same verdicts (docs/GUIDE.md section 3: the healthy run)
        assert main(["invoke", out, "--rule", "DeadRelu"]) == 0
        assert " status=NothingEvaluated " in capsys.readouterr().out.strip().splitlines()[-1]
        assert main(["invoke", out, "--rule", "LossNotDecreasing"]) == 0
        assert " status=NoIssuesFound " in capsys.readouterr().out.strip().splitlines()[-1]
        print("NothingEvaluated:", ", ".join(nothing))

"""``python -m tornasole.rules.rule_invoker``: exit codes, the RESULT line, parameters, custom rule files."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from rules_helpers import write_trial

from tornasole.rules.rule_invoker import main


@pytest.fixture
def trial_dir(tmp_path):
    steps = {s: {"gradients/w": np.full(3, 1e-9 if s >= 3 else 1e-3, np.float32)} for s in range(6)}
    return write_trial(str(tmp_path / "run"), steps)


def test_builtin_rule_issues_found_exit_1_and_result_line(trial_dir, capsys):
    code = main(["--trial-dir", trial_dir, "--rule-name", "VanishingGradient", "--threshold", "1e-7"])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 1
    assert out[-1] == (
        "RESULT rule=VanishingGradient status=IssuesFound first_step=3 fired_steps=3,4,5 "
        "steps_evaluated=6 steps_skipped=0"
    )
    assert out[0].startswith("VanishingGradient: condition met at step 3")


def test_snake_case_end_step_and_no_issue_exit_0(trial_dir, capsys):
    code = main(["--trial_dir", trial_dir, "--rule_name", "VanishingGradient", "--end_step", "3"])
    assert code == 0
    assert capsys.readouterr().out.strip() == (
        "RESULT rule=VanishingGradient status=NoIssuesFound first_step=none fired_steps=none "
        "steps_evaluated=3 steps_skipped=0"
    )


def test_bare_flag_means_true_and_start_step(trial_dir, capsys):
    code = main(
        ["--trial-dir", trial_dir, "--rule-name", "ExplodingTensor", "--only-nan", "--start-step", "4"]
    )
    assert code == 0
    assert "steps_evaluated=2" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--rule-name", "VanishingGradient", "--threshold", "abc"],
            "parameter 'threshold' value 'abc' is not a float",
        ),
        (
            ["--rule-name", "AllZero", "--tensor-regex", "("],
            "'tensor_regex' value '(' is not a valid regular expression",
        ),
        (["--rule-name", "VanishingGradient", "stray"], "ERROR unexpected argument 'stray'"),
    ],
)
def test_errors_exit_2_with_one_line(trial_dir, capsys, args, message):
    code = main(["--trial-dir", trial_dir, *args])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert message in err
    assert len(err.splitlines()) == 1


def test_unknown_rule_exit_2_with_did_you_mean(trial_dir, capsys):
    assert main(["--trial-dir", trial_dir, "--rule-name", "VanishingGradiant"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "ERROR UnknownRuleError: unknown built-in rule 'VanishingGradiant' "
        "(did you mean 'VanishingGradient'?); known rules: AllZero"
    )
    assert len(err.splitlines()) == 1


def test_custom_rule_file_with_other_trials(trial_dir, tmp_path, capsys):
    rule = tmp_path / "diff.py"
    rule.write_text(
        "from smdebug.rules import Rule\n\n"
        "class Differs(Rule):\n"
        "    def __init__(self, base_trial, other_trials=None, tname='gradients/w'):\n"
        "        super().__init__(base_trial, other_trials=other_trials)\n"
        "        self.tname = tname\n\n"
        "    def invoke_at_step(self, step):\n"
        "        a = self.base_trial.tensor(self.tname).value(step)\n"
        "        return bool((a != self.other_trials[0].tensor(self.tname).value(step)).any())\n"
    )
    other = write_trial(
        str(tmp_path / "other"), {s: {"gradients/w": np.full(3, 1e-3, np.float32)} for s in range(6)}
    )
    code = main(
        [
            "--trial-dir",
            trial_dir,
            "--rule-name",
            "Differs",
            "--rule-file",
            str(rule),
            "--other-trials",
            other,
        ]
    )
    assert code == 1
    assert "first_step=3" in capsys.readouterr().out


def test_a_raising_rule_reports_the_step(trial_dir, tmp_path, capsys):
    rule = tmp_path / "bad.py"
    rule.write_text(
        "from tornasole.rules import Rule\n\nclass Bad(Rule):\n"
        "    def invoke_at_step(self, step):\n        return {}[step]\n"
    )
    assert main(["--trial-dir", trial_dir, "--rule-name", "Bad", "--rule-file", str(rule)]) == 2
    assert capsys.readouterr().err.strip() == (
        "ERROR RuleInvocationError: rule Bad failed at step 0: KeyError: 0 (caused by KeyError: 0)"
    )


def test_runs_as_a_module(trial_dir):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tornasole.rules.rule_invoker",
            "--trial-dir",
            trial_dir,
            "--rule-name",
            "AllZero",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("ERROR RuleParameterError: AllZero: parameter 'collection_names'")


def test_missing_required_option_is_one_error_line(capsys):
    assert main(["--rule-name", "VanishingGradient"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "ERROR the following arguments are required: --trial-dir/--trial_dir (see --help)"

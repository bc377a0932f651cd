"""The ``tornasole`` command: argument parsing, output and one-line errors (no AWS needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tornasole.cli.main import main
from tornasole.cli.rules_cmd import parse_rule_spec
from tornasole.cli.table import format_table
from tornasole.cli.trial_cmd import summarize
from tornasole.trials import create_trial


def test_rule_spec_parses_name_and_string_parameters() -> None:
    assert parse_rule_spec("LossNotDecreasing:num_steps=5, diff_percent=1") == (
        "LossNotDecreasing",
        {"num_steps": "5", "diff_percent": "1"},
    )
    assert parse_rule_spec("VanishingGradient") == ("VanishingGradient", {})


@pytest.mark.parametrize("spec", ["X:threshold", ":a=1", "X:=3"])
def test_rule_spec_rejects_malformed_parameters(spec: str) -> None:
    with pytest.raises(ValueError, match="rule"):
        parse_rule_spec(spec)


def test_table_aligns_columns_and_cuts_long_cells() -> None:
    text = format_table(["a", "bb"], [["x", "y" * 100], [None, 3]], max_width=10)
    lines = text.splitlines()
    assert lines[0] == "a  bb"
    assert lines[2].endswith("yyyyyyyyy…")
    assert lines[3].startswith("-  3")


def test_summary_of_the_smdebug_fixture(fixtures_dir: Path) -> None:
    info = summarize(create_trial(str(fixtures_dir / "pt_hook_single")))
    assert info["steps"] == 13
    assert (info["first_step"], info["last_step"]) == (0, 48)
    assert info["modes"] == {"TRAIN": 8, "EVAL": 5}
    assert info["workers"] == ["worker_0"]
    assert info["training_ended"] is True
    assert info["collections"]["gradients"] == 4
    assert info["tensors"]["CrossEntropyLoss_output_0"] == 13


def test_trial_summary_command_prints_steps_and_tensors(
    fixtures_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["trial", "summary", str(fixtures_dir / "core_writer_2workers")]) == 0
    out = capsys.readouterr().out
    assert "worker_0, worker_1" in out
    assert "gradient/dense.weight" in out


def test_plot_writes_a_png_with_one_panel_per_tensor(fixtures_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "p.png"
    rc = main(
        [
            "plot",
            str(fixtures_dir / "pt_hook_single"),
            "--collection",
            "losses",
            "--tensor",
            "Net_fc1.weight",
            "-o",
            str(out),
        ]
    )
    assert rc == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "2 tensors" in capsys.readouterr().out


def test_errors_are_one_line_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc = main(["plot", str(tmp_path), "--tensor", "nope", "-o", str(tmp_path / "x.png")])
    err = capsys.readouterr().err
    assert rc == 3  # nothing there: not found
    assert f"no trial at {tmp_path}" in err
    assert err.startswith("tornasole: error: ")
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_plot_without_a_selection_names_the_options(
    fixtures_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["plot", str(fixtures_dir / "pt_hook_single")]) == 2
    assert "--tensor" in capsys.readouterr().err


def test_rules_list_prints_every_builtin_with_its_defaults(capsys: pytest.CaptureFixture) -> None:
    from tornasole.rules import rule_names

    assert main(["rules", "list"]) == 0
    out = capsys.readouterr().out
    for name in rule_names():
        assert f"\n{name} " in out
    assert "threshold=0.0000001" in out


def test_invoke_exit_code_and_summary_line(fixtures_dir: Path, capsys: pytest.CaptureFixture) -> None:
    trial = str(fixtures_dir / "pt_hook_single")
    assert main(["invoke", trial, "--rule", "ExplodingTensor"]) == 0
    assert "RESULT rule=ExplodingTensor status=NoIssuesFound" in capsys.readouterr().out
    # every saved gradient has a mean |x| below 1.0: the rule fires at the first step
    assert main(["invoke", trial, "--rule", "VanishingGradient", "--param", "threshold=1.0"]) == 1
    assert "status=IssuesFound first_step=0" in capsys.readouterr().out

"""``tornasole report TRIAL``: the recommended set evaluated on a local trial, the page written whole."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "reports"))
from report_trials import write_report_trial  # noqa: E402

from tornasole.cli.main import main  # noqa: E402


def test_report_of_a_trial(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    trial = write_report_trial(str(tmp_path / "run"), 60, names={"loss": "loss<script>"})
    out = tmp_path / "r.html"
    assert main(["report", trial, "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"wrote {out} (")
    assert "17 rules" in said or "rules, 0 found issues" in said
    html = out.read_text()
    assert "loss&lt;script&gt;" in html
    assert "loss<script>" not in html
    assert list(tmp_path.glob(".report-*")) == []  # no temporary file left


def test_a_missing_trial_is_not_found_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "nope"), "-o", str(out)]) == 3
    assert "nope" in capsys.readouterr().err
    assert not out.exists()

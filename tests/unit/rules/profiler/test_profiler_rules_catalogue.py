"""The profiler rules are listed where users look: docs/RULES.md's profiler table is the registry, and
``tornasole rules list`` has a profiler section."""

from __future__ import annotations

import re
from pathlib import Path

from tornasole.cli.main import main
from tornasole.rules.profiler import PROFILER_RULES

REPO = Path(__file__).resolve().parents[4]


def test_the_profiler_table_lists_exactly_the_registered_profiler_rules() -> None:
    text = (REPO / "docs" / "RULES.md").read_text()
    table = text.split("\n## Profiler rules", 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"^\| (\w+) \|", table, flags=re.M)
    assert sorted(n for n in names if n != "rule") == sorted(PROFILER_RULES)


def test_rules_list_has_a_profiler_section(capsys) -> None:
    assert main(["rules", "list"]) == 0
    out = capsys.readouterr().out
    section = out.split("profiler rules", 1)[1]
    for name in PROFILER_RULES:
        assert name in section
    assert "cpu_threshold=90" in section


def test_rules_list_name_shows_one_profiler_rule_in_full(capsys) -> None:
    assert main(["rules", "list", "--name", "StepOutlier"]) == 0
    out = capsys.readouterr().out
    assert "n_outliers (int, default 10)" in out
    assert "suggested fix" in out

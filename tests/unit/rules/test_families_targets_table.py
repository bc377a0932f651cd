"""The families benchmark's targets table (bench/detection/families/targets_table.py), on hand-built numbers
in the shape ``score.py --json`` writes: which family misses which of issue 29's targets, worst first, and
a clear error for a file that holds no numbers. The module reads JSON only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "detection"
sys.path.insert(0, str(BENCH))

from families.targets_table import main, summary, table, targets_met  # noqa: E402


def _numbers(caught: int, broken: int, alarms: int, healthy: int, latency: float | None, harmful=(2, 2)):
    return {
        "runs": broken + healthy,
        "built_broken": broken,
        "built_broken_detected_twin_quiet": caught,
        "built_harmful": harmful[1],
        "built_harmful_detected_twin_quiet": harmful[0],
        "built_healthy": healthy,
        "built_healthy_alarms": alarms,
        "median_latency_train_steps": latency,
        "within_one_save_interval": 0.5,
    }


PER = {
    "quiet": _numbers(16, 16, 0, 20, 0),
    "noisy": _numbers(16, 16, 3, 20, 0),  # 15 % alarms
    "late": _numbers(16, 16, 0, 20, 12),  # median 12 TRAIN steps: three save intervals
    "blind": _numbers(12, 16, 2, 20, 8, harmful=(1, 2)),  # misses all three
}


def _write(tmp_path: Path, name: str, per: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"numbers": {"recommended": per}, "runs": []}))
    return path


def test_each_target_is_judged_on_its_own_bound():
    assert targets_met(PER["quiet"]) == {"recall": True, "alarms": True, "latency": True}
    assert targets_met(PER["noisy"]) == {"recall": True, "alarms": False, "latency": True}
    assert targets_met(PER["late"]) == {"recall": True, "alarms": True, "latency": False}
    assert targets_met(PER["blind"]) == {"recall": False, "alarms": False, "latency": False}
    # at the bounds: 0.95 recall and 5 % alarms meet them, one save interval (4 TRAIN steps) meets it
    assert all(targets_met(_numbers(19, 20, 1, 20, 4)).values())
    assert targets_met(_numbers(18, 20, 2, 20, 5)) == {"recall": False, "alarms": False, "latency": False}


def test_the_table_puts_the_worst_family_first_and_marks_what_it_misses():
    rows = table(PER, held_out={"late"}).splitlines()
    assert [r.split(" | ")[0].lstrip("| ") for r in rows[2:]] == [
        "blind",
        "noisy",
        "late (held out)",
        "quiet",
    ]
    blind = rows[2]
    assert "**12/16**" in blind
    assert "**2/20**" in blind
    assert "| 1/2 |" in blind  # harmful recall: shown, not a target
    assert "**" not in rows[-1]


def test_the_summary_counts_families_and_names_the_worst():
    lines = summary(PER)
    assert lines[0].endswith("met in 3 of 4 families")
    assert lines[1].endswith("met in 2 of 4 families")
    assert lines[2].endswith("met in 2 of 4 families")
    assert "blind 0.75" in lines[3]
    assert "noisy 15%" in lines[3]
    assert lines[4].startswith("- in all: alarms on 5 of 80 built-healthy runs (6.2%); 7 of 8 harmful runs")
    assert len(lines) == 5  # no run collapsed: no line for it


def test_the_summary_names_a_healthy_run_that_collapsed():
    fell = "induction_tf/warmup_from_zero_small_batch-s0 (final 0.13, baseline 0.13): LossSpike at step 7919"
    per = {**PER, "quiet": {**PER["quiet"], "built_healthy_collapsed_cases": [fell]}}
    last = summary(per)[-1]
    assert last.startswith("- built healthy but collapsed (final score no better than the input-independent")
    assert last.endswith(fell)


def test_later_files_replace_a_family_and_the_cli_prints_the_table(tmp_path, capsys):
    first = _write(tmp_path, "all.json", PER)
    rescored = _write(tmp_path, "held.json", {"noisy": _numbers(16, 16, 0, 20, 0)})
    assert main([str(first), str(rescored), "--held-out", "noisy"]) == 0
    out = capsys.readouterr().out
    assert "| noisy (held out) | 16/16 | 2/2 | 0/20 | 0 | 50 % |" in out
    assert "alarms on 2 of 80 built-healthy runs" in out


def test_a_file_without_numbers_or_an_unknown_family_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "runs.json"
    bad.write_text("[]")
    with pytest.raises(SystemExit):
        main([str(bad)])
    assert f"{bad}: no per-family numbers of the set 'recommended'" in capsys.readouterr().err
    good = _write(tmp_path, "all.json", PER)
    with pytest.raises(SystemExit):
        main([str(good), "--held-out", "lstm"])
    assert "--held-out: lstm not among the scored families" in capsys.readouterr().err

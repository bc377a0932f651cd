"""The families benchmark's drop-one table (bench/detection/families/ablation.py), on hand-built runs in the
shape ``score.py --json`` writes: a catch is lost only when no other configuration quiet on the healthy twin
makes it, an alarm is cleared only when the configuration fired alone, collapsed healthy runs are no alarm,
later files replace a family, and a bad file or set gets a clear error. The module reads JSON only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench" / "detection"
sys.path.insert(0, str(BENCH))

from families.ablation import contributions, load_runs, main  # noqa: E402


def _run(family: str, case: str, kind: str, score: float, fired: dict[str, int | None], seed: int = 0):
    return {
        "case": f"{family}/{case}",
        "family": family,
        "seed": seed,
        "kind": kind,
        "final_val_acc": score,
        "null_score": 0.1,
        "firings": {"recommended": {conf: {"first_step": step} for conf, step in fired.items()}},
    }


RUNS = [
    # the twin: Spike fires on it, so Spike's firings on this family's broken runs are no catch
    _run("cnn", "healthy", "healthy", 0.95, {"Spike": 9, "Osc": None, "Dead": None}),
    _run("cnn", "quiet_healthy", "healthy", 0.94, {"Spike": None, "Osc": None, "Dead": None}),
    _run("cnn", "osc_only", "healthy", 0.96, {"Spike": None, "Osc": 12, "Dead": None}),
    _run("cnn", "osc_and_spike", "healthy", 0.96, {"Spike": 4, "Osc": 12, "Dead": None}),
    _run("cnn", "collapsed", "healthy", 0.1, {"Spike": None, "Osc": 3, "Dead": None}),
    # Dead alone (Spike fires on the twin), harmful (below the floor 0.94)
    _run("cnn", "dead_relu", "broken", 0.5, {"Spike": 2, "Osc": None, "Dead": 5}),
    # two configurations quiet on the twin catch it: neither alone
    _run("cnn", "lr_high", "broken", 0.3, {"Spike": None, "Osc": 8, "Dead": 6}),
    # Osc alone, harmless (above the floor)
    _run("cnn", "harmless", "broken", 0.95, {"Spike": None, "Osc": 7, "Dead": None}),
]


def test_a_catch_is_lost_only_when_one_twin_quiet_configuration_makes_it():
    c = contributions(RUNS, "recommended")
    assert c["Dead"]["alone_catches"] == ["cnn/dead_relu-s0"]
    assert c["Dead"]["alone_harmful"] == ["cnn/dead_relu-s0"]
    assert c["Osc"]["alone_catches"] == ["cnn/harmless-s0"]
    assert c["Osc"]["alone_harmful"] == []  # 0.95 is not below every healthy run
    assert c["Spike"]["alone_catches"] == []  # it fires on the twin


def test_an_alarm_is_cleared_only_where_the_configuration_fired_alone_and_collapsed_runs_are_no_alarm():
    c = contributions(RUNS, "recommended")
    assert sorted(c["Osc"]["alarms"]) == ["cnn/osc_and_spike-s0", "cnn/osc_only-s0"]
    assert c["Osc"]["alone_alarms"] == ["cnn/osc_only-s0"]
    assert sorted(c["Spike"]["alarms"]) == ["cnn/healthy-s0", "cnn/osc_and_spike-s0"]
    assert c["Spike"]["alone_alarms"] == ["cnn/healthy-s0"]
    assert "cnn/collapsed-s0" not in c["Osc"]["alarms"]


def test_the_table_and_the_runs_behind_it(tmp_path, capsys):
    path = tmp_path / "out.json"
    path.write_text(json.dumps({"numbers": {}, "runs": RUNS}))
    assert main([str(path), "--runs"]) == 0
    out = capsys.readouterr().out
    assert "| Osc | 1 | 0 | 2 | 1 |" in out
    assert "| Dead | 1 | 1 | 0 | 0 |" in out
    assert "Dead alone_harmful: cnn/dead_relu-s0" in out
    assert "8 runs, 1 families" in out


def test_a_later_file_replaces_a_family(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"runs": RUNS + [_run("iris", "healthy", "healthy", 0.9, {"Osc": None})]}))
    second.write_text(json.dumps({"runs": [_run("cnn", "healthy", "healthy", 0.9, {"Osc": None}, seed=1)]}))
    runs = load_runs([first, second])
    assert sorted((r["family"], r["seed"]) for r in runs) == [("cnn", 1), ("iris", 0)]


def test_a_file_without_runs_or_without_the_set_is_named(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main([str(bad)]) == 2
    assert "bad.json" in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"runs": RUNS}))
    assert main([str(other), "--set", "sagemaker-defaults"]) == 2
    err = capsys.readouterr().err
    assert "cnn/healthy-s0" in err
    assert "sagemaker-defaults" in err

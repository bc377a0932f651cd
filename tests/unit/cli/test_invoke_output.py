"""``tornasole invoke`` and ``rule_invoker``: one RESULT line, honest counts, bounded waits, full text."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tornasole import Hook, SaveConfig
from tornasole.cli.invoke_report import Progress, TrialNotFoundError, wait_for_trial
from tornasole.cli.main import main
from tornasole.rules.rule_invoker import main as rule_invoker_main


def _sparse_trial(path: Path, steps: int = 50, every: int = 10) -> str:
    """A run of ``steps`` steps saving every ``every``-th: gradients that vanish from step 30."""
    hook = Hook(out_dir=str(path), save_config=SaveConfig(save_interval=every))
    for step in range(steps):
        hook.save_tensor("gradients/w", np.full(4, 1e-9 if step >= 30 else 1e-2, np.float32), "gradients")
        hook.next_step()
    hook.close()
    return str(path)


def _result(out: str) -> str:
    return out.strip().splitlines()[-1]


def test_invoke_and_rule_invoker_print_the_same_result_line(tmp_path: Path, capsys) -> None:
    trial = _sparse_trial(tmp_path / "run")
    assert main(["invoke", trial, "--rule", "VanishingGradient"]) == 1
    invoke = capsys.readouterr()
    assert rule_invoker_main(["--trial-dir", trial, "--rule-name", "VanishingGradient"]) == 1
    invoker = capsys.readouterr()
    expected = (
        "RESULT rule=VanishingGradient status=IssuesFound first_step=30 fired_steps=30,40 "
        "steps_evaluated=5 steps_skipped=0"
    )
    assert _result(invoke.out) == _result(invoker.out) == expected
    assert invoke.out == invoker.out  # the fire details too
    # the progress line counts fires, it does not name a step
    assert invoke.err.strip().splitlines()[-1] == "[##############################] 5/5 steps, fired 2 times"


def test_no_fire_uses_the_same_none_token_in_both(tmp_path: Path, capsys) -> None:
    trial = _sparse_trial(tmp_path / "run")
    assert main(["invoke", trial, "--rule", "ExplodingTensor"]) == 0
    a = _result(capsys.readouterr().out)
    assert rule_invoker_main(["--trial-dir", trial, "--rule-name", "ExplodingTensor"]) == 0
    b = _result(capsys.readouterr().out)
    assert (
        a
        == b
        == (
            "RESULT rule=ExplodingTensor status=NoIssuesFound first_step=none fired_steps=none "
            "steps_evaluated=5 steps_skipped=0"
        )
    )


def test_invoke_on_a_path_without_a_trial_is_not_found_in_bounded_time(tmp_path: Path, capsys) -> None:
    started = time.monotonic()
    assert main(["invoke", str(tmp_path / "nope"), "--rule", "DeadRelu", "--timeout", "0.5"]) == 3
    assert time.monotonic() - started < 5
    err = capsys.readouterr().err
    assert f"waiting up to 0.5 s for a trial at {tmp_path / 'nope'}" in err
    assert f"tornasole: error: no trial at {tmp_path / 'nope'}: waited 0.5 s for collections file" in err


def test_invoke_unknown_rule_is_a_usage_error_with_a_suggestion(tmp_path: Path, capsys) -> None:
    trial = _sparse_trial(tmp_path / "run")
    assert main(["invoke", trial, "--rule", "ExplodingTensors"]) == 2  # as `jobs register` says it
    assert "(did you mean 'ExplodingTensor'?)" in capsys.readouterr().err


def test_wait_for_trial_picks_up_a_trial_that_appears(tmp_path: Path) -> None:
    path = tmp_path / "late"
    writer = threading.Timer(0.3, _sparse_trial, args=(path,))
    writer.start()
    err = io.StringIO()
    try:
        trial = wait_for_trial(str(path), timeout=20, poll=0.05, err=err)
    finally:
        writer.join()
    assert trial.steps() == [0, 10, 20, 30, 40]
    assert err.getvalue().splitlines()[-1] == f"found a trial at {path}"


def test_wait_for_trial_without_waiting_says_nothing_is_there(tmp_path: Path) -> None:
    with pytest.raises(TrialNotFoundError, match="found no collections file, index file or end marker"):
        wait_for_trial(str(tmp_path), timeout=0, err=io.StringIO())


def test_progress_words() -> None:
    p = Progress(4, io.StringIO(), width=4)
    assert p.text(0, 0) == "[....] 0/4 steps, fired 0 times"
    assert p.text(2, 1) == "[##..] 2/4 steps, fired once"
    assert p.text(6, 2) == "[####] 6/6 steps, fired 2 times"  # a live trial went past the first count


def test_rules_list_name_prints_every_parameter_in_full(capsys) -> None:
    from tornasole.rules import get_rule

    assert main(["rules", "list", "--name", "CheckInputImages"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    for p in get_rule("CheckInputImages").PARAMETERS:
        assert f"    {p.name} ({p.kind}, default {p.default})" in out


def test_rules_list_piped_is_not_cut(capsys) -> None:
    from tornasole.rules import get_rule

    assert main(["rules", "list"]) == 0  # capsys' stdout is not a terminal: a pipe
    out = capsys.readouterr().out
    assert "…" not in out
    params = ", ".join(f"{p.name}={p.default}" for p in get_rule("ClassImbalance").PARAMETERS)
    assert params in out


def test_rules_list_json_has_every_rule_and_parameter(capsys) -> None:
    from tornasole.rules import get_rule, rule_names

    assert main(["rules", "list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in data] == rule_names()
    for rule in data:
        declared = get_rule(rule["name"]).PARAMETERS
        assert [(p["name"], p["default"]) for p in rule["parameters"]] == [
            (p.name, p.default) for p in declared
        ]


def test_rules_list_unknown_name(capsys) -> None:
    assert main(["rules", "list", "--name", "deadrelu"]) == 2
    assert "(did you mean 'DeadRelu'?)" in capsys.readouterr().err


def test_table_cuts_only_for_a_terminal() -> None:
    from tornasole.cli.table import cell_width, format_table

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert cell_width(70, Tty()) == 70
    assert cell_width(70, io.StringIO()) is None
    assert format_table(["a"], [["x" * 200]], max_width=None).splitlines()[2] == "x" * 200


def _live_trial(path: Path, steps: int) -> Hook:
    """A hook that wrote ``steps`` steps and is still open (no end marker)."""
    hook = Hook(out_dir=str(path), save_config=SaveConfig(save_interval=1))
    for _ in range(steps):
        hook.save_tensor("gradients/w", np.full(4, 1e-2, np.float32), "gradients")
        hook.next_step()
    return hook


def test_a_live_trial_that_stops_writing_ends_after_the_idle_timeout(tmp_path: Path, capsys) -> None:
    hook = _live_trial(tmp_path / "live", 3)
    try:
        started = time.monotonic()
        argv = ["invoke", str(tmp_path / "live"), "--rule", "VanishingGradient", "--idle-timeout", "1"]
        assert main(argv) == 3
        assert time.monotonic() - started < 15
    finally:
        hook.close()
    err = capsys.readouterr().err
    assert f"trial {tmp_path / 'live'} is live (no end marker yet)" in err
    assert "or no new step for 1 s (--idle-timeout)" in err
    assert "tornasole: error: trial " in err
    assert "no new step after step" in err


def test_a_live_trial_is_evaluated_as_its_steps_land(tmp_path: Path, capsys) -> None:
    from tornasole.cli.invoke_report import run_rule
    from tornasole.rules import create_rule

    path = tmp_path / "live"
    hook = _live_trial(path, 2)

    def finish() -> None:
        for _ in range(2):
            hook.save_tensor("gradients/w", np.full(4, 1e-9, np.float32), "gradients")
            hook.next_step()
        hook.close()

    trial = wait_for_trial(str(path), timeout=5, err=io.StringIO())
    late = threading.Timer(0.5, finish)
    late.start()
    try:
        err = io.StringIO()
        summary = run_rule(create_rule("VanishingGradient", trial), idle_timeout=30, poll=0.1, err=err)
    finally:
        late.join()
    assert (summary.steps_evaluated, summary.steps_skipped, summary.fired_steps) == (4, 0, [2, 3])
    assert err.getvalue().strip().splitlines()[-1].endswith("4/4 steps, fired 2 times")


def test_plot_a_misspelt_tensor_suggests_the_saved_one(tmp_path: Path, capsys) -> None:
    trial = _sparse_trial(tmp_path / "run")
    assert main(["plot", trial, "--tensor", "gradients/v", "-o", str(tmp_path / "x.png")]) == 3
    err = capsys.readouterr().err.strip()
    assert err == (
        "tornasole: error: trial run: no tensor 'gradients/v' (did you mean 'gradients/w'?) "
        "(tornasole trial summary lists them)"
    )
    assert not (tmp_path / "x.png").exists()


def test_trial_summary_waits_when_asked(tmp_path: Path, capsys) -> None:
    started = time.monotonic()
    assert main(["trial", "summary", str(tmp_path / "nope"), "--timeout", "0.5"]) == 3
    assert 0.4 < time.monotonic() - started < 5
    assert "waited 0.5 s" in capsys.readouterr().err

"""How the families scorer counts (bench/detection/families/counting.py), on hand-built result dicts: a
broken run is detected only by a configuration quiet on its healthy twin (issue 29), and it is harmful only
when it ended worse than every built-healthy run of its family (DeepFD's killed mutant); a built-healthy run
that ended no better than the input-independent baseline collapsed and is counted apart. The module imports
neither PyTorch nor scikit-learn; ``score.py --recount`` (one test) needs PyTorch, never scikit-learn."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "detection"
sys.path.insert(0, str(BENCH))

from families.counting import (  # noqa: E402
    collapsed,
    fires,
    harmful,
    healthy_floor,
    null_score,
    twin_of,
    twin_quiet_configurations,
    worst_family,
)

SET = "recommended"


def _run(case: str, seed: int, kind: str, fired: dict[str, int | None], score: float = 0.9) -> dict:
    family = case.split("/")[0]
    return {
        "case": case,
        "family": family,
        "seed": seed,
        "kind": kind,
        "final_val_acc": score,
        "firings": {SET: {conf: {"first_step": step} for conf, step in fired.items()}},
    }


def test_a_configuration_that_fires_on_the_healthy_twin_does_not_detect():
    twin = _run("cnn/healthy", 0, "healthy", {"Overfit": 40, "DeadRelu": None})
    broken = _run("cnn/lr_too_high", 0, "broken", {"Overfit": 12, "DeadRelu": None})
    assert fires(broken, SET) == [(12, "Overfit")]  # the old count: it fired
    assert twin_quiet_configurations(broken, [twin, broken], SET) == set()  # the new: its twin fires alike


def test_a_configuration_quiet_on_the_twin_detects():
    twin = _run("cnn/healthy", 0, "healthy", {"Overfit": 40, "DeadRelu": None})
    broken = _run("cnn/lr_too_high", 0, "broken", {"Overfit": 12, "DeadRelu": 3})
    assert twin_quiet_configurations(broken, [twin, broken], SET) == {"DeadRelu"}


def test_the_twin_is_the_same_family_and_seed():
    twins = [
        _run("cnn/healthy", 1, "healthy", {"DeadRelu": 5}),  # other seed
        _run("rnn/healthy", 0, "healthy", {"DeadRelu": 5}),  # other family
        _run("cnn/healthy_long", 0, "healthy", {"DeadRelu": 5}),  # a healthy run, not the twin
    ]
    broken = _run("cnn/init_too_large", 0, "broken", {"DeadRelu": 2})
    assert twin_of(broken, [*twins, broken]) is None
    # without a twin among the results, the run's own firings count
    assert twin_quiet_configurations(broken, [*twins, broken], SET) == {"DeadRelu"}
    twin = _run("cnn/healthy", 0, "healthy", {"DeadRelu": 9})
    assert twin_of(broken, [*twins, twin, broken]) is twin
    assert twin_quiet_configurations(broken, [*twins, twin, broken], SET) == set()


def test_harmful_means_worse_than_every_built_healthy_run_of_the_family():
    family = [
        _run("regression/healthy", 0, "healthy", {}, 0.91),
        _run("regression/noisy_small_batch", 1, "healthy", {}, 0.62),
        _run("regression/lr_too_high", 0, "broken", {}, 0.10),  # broken runs set no floor
    ]
    assert healthy_floor(family) == 0.62
    assert harmful(_run("regression/init_too_large", 0, "broken", {}, 0.61), family)
    assert not harmful(_run("regression/init_too_large", 0, "broken", {}, 0.62), family)  # as good: no harm
    assert not harmful(_run("regression/init_too_large", 0, "broken", {}, 0.80), family)
    assert harmful(_run("regression/lr_too_high", 1, "broken", {}, float("nan")), family)  # diverged
    assert harmful({**family[2], "final_val_acc": None}, family)
    assert not harmful(family[0], family)  # a healthy run is never a killed mutant
    assert not harmful(family[2], [family[2]])  # nothing healthy to compare with


def test_the_input_independent_baseline_is_the_majority_or_the_mean():
    # a classifier's: the most frequent class's share; a float32 target of class ids reads alike
    assert null_score("classify", np.array([3, 3, 1, 0, 3, 2])) == 0.5
    assert null_score("classify", np.array([2.0, 2.0, 0.0])) == pytest.approx(2 / 3)
    # a sigmoid output's: each column's more frequent value, averaged over the columns; a Keras (N, 1) alike
    assert null_score("binary", np.array([0, 0, 0, 1])) == 0.75
    assert null_score("binary", np.array([[0.0], [1.0], [1.0], [1.0]])) == 0.75
    assert null_score("multilabel", np.array([[1, 0], [1, 0], [0, 0], [1, 1]])) == pytest.approx(0.75)
    # an R^2's: predicting the mean explains nothing, whatever the targets
    for task in ("regress", "reconstruct", "denoise"):
        assert null_score(task, np.array([5.0, -1.0])) == 0.0
    with pytest.raises(ValueError, match="unknown task 'rank'"):
        null_score("rank", np.array([1]))


def test_a_healthy_run_that_ends_at_the_baseline_collapsed_and_sets_no_floor():
    # induction_tf's warmup_from_zero_small_batch s0 as it was recorded: a float32 accuracy of 39/300
    fell = {
        **_run("induction_tf/warmup_from_zero_small_batch", 0, "healthy", {}, 0.12999999523),
        "null_score": 0.13,
    }
    good = {**_run("induction_tf/healthy", 0, "healthy", {}, 0.99), "null_score": 0.13}
    assert collapsed(fell)
    assert not collapsed(good)
    assert not collapsed({**fell, "final_val_acc": 0.1334})  # one sample better than the majority class
    assert not collapsed({**fell, "kind": "broken"})  # a broken run is judged by harm, not here
    assert not collapsed(_run("cnn/healthy", 0, "healthy", {}, 0.1))  # no baseline recorded: not judged
    assert collapsed({**fell, "final_val_acc": float("nan")})  # a diverged healthy run did not train either
    family = [fell, good]
    assert healthy_floor(family) == 0.99  # not 0.13: the collapse would excuse every broken run above it
    assert harmful(_run("induction_tf/init_too_large", 0, "broken", {}, 0.15), family)
    assert healthy_floor([fell]) is None


def test_the_worst_family_is_the_lowest_ratio_and_ignores_empty_columns():
    per = {
        "binary": {"hit": 14, "n": 16},
        "transformer": {"hit": 8, "n": 14},
        "regression": {"hit": 4, "n": 7},  # the same ratio as transformer, on fewer runs
        "softmax": {"hit": 0, "n": 0},
    }
    assert worst_family(per, "hit", "n") == ("transformer", 8, 14)
    assert worst_family({"softmax": {"hit": 0, "n": 0}}, "hit", "n") is None


def test_the_counting_imports_without_pytorch_or_scikit_learn():
    code = (
        f"import sys; sys.path.insert(0, {str(BENCH)!r}); import families.counting; "
        "assert not {'torch', 'sklearn', 'tensorflow'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_scorer_counts_a_collapsed_healthy_run_apart_when_it_counts_again(tmp_path):
    """``score.py --recount``: the saved firings counted again, the baseline drawn from the recipe's data and
    seed (induction_tf's synthetic tokens: seed 0's validation set holds 39 of 300 of its commonest class)."""
    runs = [
        _run("induction_tf/healthy", 0, "healthy", {"Overfit": None}, 0.99),
        _run("induction_tf/warmup_from_zero_small_batch", 0, "healthy", {"LossSpike": 70}, 0.12999999523),
        _run("induction_tf/noisy_small_batch", 0, "healthy", {"LossSpike": 90}, 1.0),
        _run("induction_tf/init_too_large", 0, "broken", {"InitialLossTooHigh": 0}, 0.15),
        _run("induction_tf/softmax_before_cross_entropy", 0, "broken", {"LossSpike": None}, 1.0),
    ]
    for r in runs:
        r.update(labels={}, variants={}, onset=None, train_before=list(range(100)))
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps({"numbers": {SET: {}}, "runs": runs}))
    out = tmp_path / "out.json"
    score = BENCH / "families" / "score.py"
    done = subprocess.run(
        [sys.executable, str(score), "--recount", str(saved), "--json", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    m = json.loads(out.read_text())["numbers"][SET]["induction_tf"]
    assert (m["built_healthy"], m["built_healthy_alarms"]) == (2, 1)  # noisy_small_batch's alarm stays one
    assert m["built_healthy_collapsed"] == 1
    assert m["built_healthy_collapsed_cases"] == [
        "induction_tf/warmup_from_zero_small_batch-s0 (final 0.13, baseline 0.13): LossSpike at step 70"
    ]
    assert m["built_harmful"] == 1  # init_too_large (0.15) is below the floor of 0.99, not of 0.13
    assert "built healthy but collapsed" in done.stdout
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    failed = subprocess.run(
        [sys.executable, str(score), "--recount", str(bad)], capture_output=True, text=True, check=False
    )
    assert failed.returncode != 0
    assert f"--recount {bad}: not a score.py --json file" in failed.stderr


def test_a_rule_scan_replaces_one_configurations_firings_before_counting_again(tmp_path):
    """``score.py --recount --patch CONF=scan.json``: a rule's firings computed alone over the kept trials
    (``rule_scan.py --json``) replace the set's recorded ones run by run, and the counts follow; a scan whose
    ``before`` is not what was recorded is refused, naming the run."""
    runs = [
        _run("induction_tf/healthy", 0, "healthy", {"LossSpike": 90, "Overfit": None}, 0.99),
        _run("induction_tf/init_too_large", 0, "broken", {"LossSpike": None, "Overfit": 30}, 0.15),
    ]
    for r in runs:
        r.update(labels={}, variants={}, onset=None, train_before=list(range(100)))
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps({"numbers": {SET: {}}, "runs": runs}))

    def scan(healthy_before: int | None) -> Path:
        rows = [
            {
                "case": "induction_tf/healthy",
                "seed": 0,
                "before": {"step": healthy_before, "details": "x"},
                "after": {"step": None, "details": None},
            },
            {
                "case": "induction_tf/init_too_large",
                "seed": 0,
                "before": {"step": None, "details": None},
                "after": {"step": 40, "details": "LossSpike: ..."},
            },
        ]
        path = tmp_path / f"scan{healthy_before}.json"
        path.write_text(json.dumps(rows))
        return path

    score = BENCH / "families" / "score.py"
    out = tmp_path / "out.json"
    done = subprocess.run(
        [
            sys.executable,
            str(score),
            "--recount",
            str(saved),
            "--patch",
            f"LossSpike={scan(90)}",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--patch LossSpike: 2 first firings moved" in done.stdout
    patched = {
        r["case"]: r["firings"][SET]["LossSpike"]["first_step"] for r in json.loads(out.read_text())["runs"]
    }
    assert patched == {"induction_tf/healthy": None, "induction_tf/init_too_large": 40}
    m = json.loads(out.read_text())["numbers"][SET]["induction_tf"]
    assert m["built_healthy_alarms"] == 0  # the alarm the scan cleared is gone from the count
    wrong = subprocess.run(
        [sys.executable, str(score), "--recount", str(saved), "--patch", f"LossSpike={scan(70)}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert wrong.returncode != 0
    assert (
        "induction_tf/healthy-s0: the scan's before (70) is not the recorded first firing (90)"
        in wrong.stderr
    )

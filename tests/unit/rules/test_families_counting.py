"""How the families scorer counts (bench/detection/families/counting.py), on hand-built result dicts: a
broken run is detected only by a configuration quiet on its healthy twin (issue 29), and it is harmful only
when it ended worse than every built-healthy run of its family (DeepFD's killed mutant). The module imports
neither PyTorch nor scikit-learn."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench" / "detection"
sys.path.insert(0, str(BENCH))

from families.counting import (  # noqa: E402
    fires,
    harmful,
    healthy_floor,
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

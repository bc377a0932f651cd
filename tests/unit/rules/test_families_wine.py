"""The held-out ``wine`` family (branch lrhigh) builds what its recipe says: a SiLU MLP [13, 64, 64, 3] with
BatchNorm1d after each hidden Linear and dropout 0.2, plain cross-entropy, Adam 3e-3 (weight decay 1e-4),
batch 16, ``OneCycleLR`` stepped per batch, 40 epochs, on the wines with a stratified 40-sample validation
set; it takes the generator's faults and hard negatives. The data set is replaced by a synthetic one of its
shape (the test venv has no scikit-learn)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families.cases import CASES, SCORED_FAMILIES  # noqa: E402
from families.training import FAMILIES, build, run  # noqa: E402
from family_cases import COMMON_BROKEN, PYTORCH_HEALTHY, cases_of, of_kind  # noqa: E402

from tornasole.modes import TRAIN  # noqa: E402
from tornasole.trials import create_trial  # noqa: E402


def _wine_shaped(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Three standardised Gaussian blobs in 13 features, 178 samples, 40 held out."""
    y = rng.integers(0, 3, size=178).astype(np.int64)
    x = (rng.standard_normal((178, 13)) + 2.0 * np.eye(3, 13)[y]).astype(np.float32)
    return (x - x.mean(axis=0)) / x.std(axis=0), y, 3, 40


def test_wine_is_scored_and_takes_the_common_faults_and_hard_negatives():
    assert "wine" in SCORED_FAMILIES
    cases = cases_of("wine")
    assert of_kind(cases, "broken") == COMMON_BROKEN
    assert of_kind(cases, "healthy") == PYTORCH_HEALTHY | {"warm_restarts", "heavy_dropout"}
    assert CASES["wine/lr_too_high"][2].lr_mult == 100.0  # Adam: x100
    assert not any(name.startswith("wine_keras/") for name in CASES)  # PyTorch only


def test_wine_is_a_silu_batchnorm_mlp_under_adam_and_one_cycle():
    nn = torch.nn
    recipe = FAMILIES["wine"]
    assert (recipe.data, recipe.opt, recipe.lr, recipe.weight_decay, recipe.batch, recipe.epochs) == (
        "wine_stratified",
        "adam",
        3e-3,
        1e-4,
        16,
        40,
    )
    assert (recipe.schedule, recipe.warmup_epochs, recipe.label_smoothing) == ("onecycle", 0, 0.0)
    model = build(CASES["wine/healthy"][2], recipe, 13, 3)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(13, 64), (64, 64), (64, 3)]
    assert [type(m) for m in model.modules() if isinstance(m, (nn.BatchNorm1d, nn.SiLU, nn.Dropout))] == [
        nn.BatchNorm1d,
        nn.SiLU,
        nn.Dropout,
    ] * 2
    assert {m.p for m in model.modules() if isinstance(m, nn.Dropout)} == {0.2}
    assert model.blocks[0] == ("fc1", "fc1_norm", "fc1_silu", "fc1_drop")  # BatchNorm after the Linear
    sigmoid = build(CASES["wine/deep_sigmoid"][2], recipe, 13, 3)
    assert sum(isinstance(m, nn.Sigmoid) for m in sigmoid.modules()) == 6


def test_a_wine_run_trains_under_one_cycle_stepped_per_batch(tmp_path, monkeypatch):
    from families import data

    monkeypatch.setattr(data, "wine_stratified", _wine_shaped)
    spec = replace(CASES["wine/healthy"][2], epochs=4, save_lr=True)
    result = run("w", spec, 0, str(tmp_path))
    assert result.final_val_acc > 0.8  # three separable blobs
    trial = create_trial(result.path)
    assert "Mlp_input_0" in trial.tensor_names(collection="model_input")
    # 138 training samples in batches of 16: 9 TRAIN steps an epoch, saved every 4
    assert trial.tensor("CrossEntropyLoss_input_0").value(0, mode=TRAIN).shape == (16, 3)
    lr = trial.tensor("scalar/lr/0")
    rates = [float(np.ravel(lr.value(s, mode=TRAIN))[0]) for s in lr.steps(mode=TRAIN)]
    # OneCycleLR per batch: from max_lr / 25 up to max_lr (at 30% of the 36 steps), then down again
    assert rates[0] == np.float32(3e-3 / 25)
    assert max(rates) > 0.9 * 3e-3 > rates[-1]
    assert len(set(rates)) == len(rates)  # it moves every optimiser step, not per epoch


def test_the_scheduler_zeroing_fault_holds_under_the_per_batch_one_cycle(tmp_path, monkeypatch):
    """``scheduler_zeroes_lr`` sets the rate to 0 after epoch 0 whatever the schedule: OneCycleLR steps after
    every optimiser step and once overrode the epoch's 0, so wine's mutant trained as its healthy twin
    (branch noop)."""
    from families import data

    monkeypatch.setattr(data, "wine_stratified", _wine_shaped)
    spec = replace(CASES["wine/scheduler_zeroes_lr"][2], epochs=3, save_lr=True)
    assert spec.lr_zero_after_epoch == 0
    result = run("z", spec, 0, str(tmp_path))
    trial = create_trial(result.path)
    lr = trial.tensor("scalar/lr/0")
    # 9 TRAIN steps an epoch, saved every 4: 0, 4, 8 in epoch 0; 12, 16 in epoch 1; 20, 24 in epoch 2
    assert lr.steps(mode=TRAIN) == [0, 4, 8, 12, 16, 20, 24]
    rates = [float(np.ravel(lr.value(s, mode=TRAIN))[0]) for s in (0, 4, 8, 12, 16, 20, 24)]
    assert rates[0] == np.float32(3e-3 / 25) < rates[1] < rates[2]  # epoch 0: OneCycleLR's rise
    assert rates[3:] == [0.0] * 4  # from epoch 1 on: 0, not OneCycleLR's next rate
    weights = trial.tensor("Mlp_fc1.weight")
    # a step's weights are saved before its update: step 12 has every update of epoch 0, then none
    saved = {s: weights.value(s, mode=TRAIN) for s in (0, 8, 12, 16, 20, 24)}
    assert not np.array_equal(saved[0], saved[8])  # epoch 0 trains
    assert not np.array_equal(saved[8], saved[12])  # step 8, epoch 0's last, updates too
    assert all(np.array_equal(saved[12], saved[s]) for s in (16, 20, 24))  # then nothing moves

"""The families benchmark's two held-out families of branch heldout2 build what their recipes say:
``digits_rows``, the digits read as 8 rows of 8 pixels by a one-layer bidirectional GRU [GRU(8, 48, both
directions) -> the two directions' final states -> Linear(96, 10)] under RMSprop, gradient clipping by norm
1.0 and ReduceLROnPlateau on the validation loss; and ``diabetes_huber``, an ELU MLP [10, 64, 64, 1] without
normalisation layers, a Huber loss, AdamW under a linear warmup then a linear decay to 0 per optimiser step.
Both take the generator's faults and hard negatives that apply to them. No scikit-learn in the test venv:
the loaders are replaced by synthetic data of the same shapes."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families import data  # noqa: E402
from families.cases import CASES, SCORED_FAMILIES  # noqa: E402
from families.training import FAMILIES, PLATEAU_FACTOR, PLATEAU_PATIENCE, _linear_factor, build, run  # noqa: E402
from family_cases import COMMON_BROKEN, PYTORCH_HEALTHY, cases_of, of_kind  # noqa: E402

from tornasole.modes import TRAIN  # noqa: E402
from tornasole.trials import create_trial  # noqa: E402


def test_the_two_families_are_scored_and_take_the_faults_and_hard_negatives_of_their_architecture():
    rows, huber = cases_of("digits_rows"), cases_of("diabetes_huber")
    # the recurrent classifier: no deep sigmoid stack (an MLP mutation, as rnn and lstm), no layer frozen on
    # purpose (the GRU is its only hidden layer), no dropout to raise
    assert of_kind(rows, "broken") == COMMON_BROKEN - {"deep_sigmoid"}
    assert of_kind(rows, "healthy") == PYTORCH_HEALTHY - {"frozen_first_on_purpose"}
    # the regression: no label faults, no noisy labels (a real-valued target); dropout 0.5 as regression's
    assert of_kind(huber, "broken") == COMMON_BROKEN - {"labels_shuffled", "softmax_before_cross_entropy"}
    assert of_kind(huber, "healthy") == PYTORCH_HEALTHY - {"noisy_labels"} | {"heavy_dropout"}
    assert CASES["digits_rows/lr_too_high"][2].lr_mult == 100.0  # RMSprop: x100
    assert CASES["diabetes_huber/lr_too_high"][2].lr_mult == 100.0  # AdamW: x100
    assert {"digits_rows", "diabetes_huber"} <= set(SCORED_FAMILIES)
    assert not any(name.startswith(("digits_rows_keras/", "diabetes_huber_keras/")) for name in CASES)


def test_digits_rows_is_a_bidirectional_gru_over_the_rows_to_a_linear_head():
    recipe = FAMILIES["digits_rows"]
    assert (recipe.data, recipe.opt, recipe.lr, recipe.batch, recipe.epochs) == (
        "digits_rows_stratified",
        "rmsprop",
        3e-3,
        32,
        15,
    )
    assert (recipe.schedule, recipe.clip_norm, PLATEAU_FACTOR, PLATEAU_PATIENCE) == ("plateau", 1.0, 0.5, 2)
    model = build(CASES["digits_rows/healthy"][2], recipe, 8, 10)
    assert next(iter(model.named_parameters()))[0] == "gru.weight_ih_l0"  # the first layer
    assert (model.gru.input_size, model.gru.hidden_size, model.gru.bidirectional) == (8, 48, True)
    assert (model.out.in_features, model.out.out_features) == (96, 10)
    x = torch.randn(5, 8, 8)
    with torch.no_grad():
        h, _ = model.gru(x)
        # the forward direction after the last row, the backward direction after the first
        expected = model.out(torch.cat([h[:, -1, :48], h[:, 0, 48:]], dim=1))
        assert torch.allclose(model(x), expected, atol=1e-6)


def test_diabetes_huber_is_an_elu_mlp_without_normalisation_under_a_huber_loss():
    recipe = FAMILIES["diabetes_huber"]
    assert (recipe.data, recipe.task, recipe.loss, recipe.opt, recipe.lr, recipe.weight_decay) == (
        "diabetes",
        "regress",
        "huber",
        "adamw",
        3e-3,
        1e-2,
    )
    assert (recipe.schedule, recipe.warmup_epochs, recipe.batch, recipe.epochs) == ("linear_step", 1, 16, 15)
    model = build(CASES["diabetes_huber/healthy"][2], recipe, 10, 0)
    kinds = [type(m).__name__ for m in model.children()]
    assert kinds == ["Linear", "ELU", "Linear", "ELU", "Linear"]  # no BatchNorm, no LayerNorm, no dropout
    assert [m.out_features for m in model.children() if isinstance(m, nn.Linear)] == [64, 64, 1]
    heavy = build(CASES["diabetes_huber/heavy_dropout"][2], recipe, 10, 0)
    assert {m.p for m in heavy.modules() if isinstance(m, nn.Dropout)} == {0.5}
    deep = build(CASES["diabetes_huber/deep_sigmoid"][2], recipe, 10, 0)
    assert sum(isinstance(m, nn.Sigmoid) for m in deep.modules()) == 6
    # a warmup from 0 over the first epoch's steps, then down to 0 at the last step
    assert [_linear_factor(4, 12, s) for s in (0, 2, 4, 8, 12, 13)] == [0.0, 0.5, 1.0, 0.5, 0.0, 0.0]


def _rows(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    y = rng.integers(0, 10, size=80).astype(np.int64)
    x = rng.random((80, 8, 8)).astype(np.float32)
    return x, y, 10, 16


def _patients(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    x = rng.standard_normal((80, 10)).astype(np.float32)
    y = (x @ rng.standard_normal(10)).astype(np.float32)[:, None]
    return x, y, 0, 16


def _rates(path: str) -> list[float]:
    lr = create_trial(path).tensor("scalar/lr/0")
    return [float(np.ravel(lr.value(s, mode=TRAIN))[0]) for s in lr.steps(mode=TRAIN)]


def test_a_digits_rows_run_clips_uses_rmsprop_and_halves_its_rate_on_a_plateau(tmp_path, monkeypatch):
    """64 training sequences in batches of 32 (2 optimiser steps an epoch, each one saved here); at a rate
    1e-4 of the recipe's the validation loss does not improve by PyTorch's relative 1e-4, so the rate halves
    once the bad epochs exceed the patience of 2."""
    clipped: list[float] = []
    real_clip = torch.nn.utils.clip_grad_norm_
    optimisers: list[str] = []
    real_step = torch.optim.RMSprop.step

    def recording_clip(parameters, max_norm, *args, **kwargs):
        clipped.append(max_norm)
        return real_clip(parameters, max_norm, *args, **kwargs)

    def recording_step(self, *args, **kwargs):
        optimisers.append(type(self).__name__)
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recording_clip)
    monkeypatch.setattr(torch.optim.RMSprop, "step", recording_step)
    monkeypatch.setattr(data, "digits_rows_stratified", _rows)
    monkeypatch.setattr("families.training.SAVE_INTERVAL", 1)
    spec = replace(CASES["digits_rows/lr_too_low"][2], epochs=5, save_lr=True)
    result = run("r", spec, 0, str(tmp_path))
    assert clipped == [1.0] * 10
    assert optimisers == ["RMSprop"] * 10
    rates = _rates(result.path)
    base = 3e-3 * 1e-4
    # epochs 0-3 at the base rate (epoch 0 sets the best; 1, 2, 3 do not improve: the third exceeds the
    # patience of 2), then halved
    assert rates[:8] == pytest.approx([base] * 8, rel=1e-6)
    assert rates[8:10] == pytest.approx([base * 0.5] * 2, rel=1e-6)
    assert create_trial(result.path).tensor("BiGruRows_input_0").value(0, mode=TRAIN).shape == (32, 8, 8)


def test_a_diabetes_huber_run_saves_its_huber_loss_and_its_linear_schedule(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "diabetes", _patients)
    monkeypatch.setattr("families.training.SAVE_INTERVAL", 1)
    spec = replace(CASES["diabetes_huber/healthy"][2], epochs=3, save_lr=True)
    result = run("h", spec, 0, str(tmp_path))
    trial = create_trial(result.path)
    assert "HuberLoss_output_0" in trial.tensor_names(collection="losses")
    assert trial.tensor("HuberLoss_input_0").value(0, mode=TRAIN).shape == (16, 1)
    # 64 patients in batches of 16: 4 optimiser steps an epoch, a warmup of 4, a decay over the other 8
    assert _rates(result.path) == pytest.approx(
        [3e-3 * _linear_factor(4, 12, s) for s in range(12)], abs=1e-9
    )
    assert np.isfinite(result.final_val_acc)

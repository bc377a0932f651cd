"""The families benchmark's two held-out families of branch heldout4 build what their recipes say:
``multilabel``, a ReLU MLP [64, 64, 64, 4] with dropout 0.2 and four independent sigmoid outputs (logits
into ``BCEWithLogitsLoss``) for four binary attributes of each digit, under NAdam and a per-epoch polynomial
decay (power 2); and ``gru_keras`` (Keras only), Keras's own ``GRU(32)`` to a ``Dense(6)`` of logits on a
marker-order task, under Adam with Keras's ``clipnorm`` and Keras's ``PiecewiseConstantDecay``. Both take the
generator's faults and hard negatives that apply to their architecture. The runs here train on a few dozen
samples. scikit-learn is a benchmark dependency, not a test one (``make test`` does not install it): the
digits are a seeded stand-in for ``load_digits``, 180 of each digit as 64 pixels in 0-16."""

from __future__ import annotations

import itertools
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families import data  # noqa: E402
from families.cases import CASES, SCORED_FAMILIES  # noqa: E402
from families.training import FAMILIES, _lr_at, _score, build, run  # noqa: E402
from family_cases import (  # noqa: E402
    COMMON_BROKEN,
    COMMON_HEALTHY,
    DIGITS,
    KERAS_BROKEN,
    PYTORCH_HEALTHY,
    cases_of,
    of_kind,
    with_stand_in_digits,
)

from tornasole.modes import TRAIN  # noqa: E402
from tornasole.trials import create_trial  # noqa: E402


def test_the_two_families_are_scored_and_take_the_faults_and_hard_negatives_of_their_architecture():
    ml, gru = cases_of("multilabel"), cases_of("gru_keras")
    # the multi-label MLP: no softmax to put before its loss (independent sigmoids, as binary); a ReLU MLP
    # with dropout, so the deep sigmoid stack, the wide sparse ReLU layer and dropout 0.5
    assert of_kind(ml, "broken") == COMMON_BROKEN - {"softmax_before_cross_entropy"}
    assert of_kind(ml, "healthy") == PYTORCH_HEALTHY | {"wide_sparse_relu", "heavy_dropout"}
    assert CASES["multilabel/wide_sparse_relu"][2].width == 512
    # the Keras GRU: its GRU is its only hidden layer (no layer frozen on purpose); no MLP, no dropout
    assert of_kind(gru, "broken") == KERAS_BROKEN - {"deep_sigmoid"}
    assert of_kind(gru, "healthy") == COMMON_HEALTHY - {"frozen_first_on_purpose"}
    assert {spec.framework for name, (_, fam, spec) in CASES.items() if fam == "gru_keras"} == {"keras"}
    assert CASES["multilabel/lr_too_high"][2].lr_mult == 100.0  # NAdam: x100
    assert CASES["gru_keras/lr_too_high"][2].lr_mult == 100.0  # Adam: x100
    assert {"multilabel", "gru_keras"} <= set(SCORED_FAMILIES)
    assert not {"gru", "multilabel_keras"} & set(SCORED_FAMILIES)
    assert not any(name.startswith(("gru/", "multilabel_keras/")) for name in CASES)


def test_digit_attributes_are_the_four_written_down_and_the_split_is_stratified_and_seeded():
    x, y, classes, n_val = with_stand_in_digits(lambda: data.digit_attributes(np.random.default_rng(0)))
    assert (x.shape, x.dtype, y.shape, y.dtype, classes, n_val) == (
        (1800, 64),
        np.float32,
        (1800, 4),
        np.float32,
        2,
        400,  # each digit's share of the 400 asked for: 40
    )
    assert [name for name, _ in data.DIGIT_ATTRIBUTES] == ["even", "at_least_5", "closed_loop", "prime"]
    # each sample's attributes are its digit's: the samples are the digits in the stratified split's order
    # (the standardisation undone gives their raw pixels back)
    d = DIGITS
    n_train = 1800 - 400
    train_idx, val_idx = data._stratified_split(d.target.astype(np.int64), 400, np.random.default_rng(0))
    order = np.concatenate([train_idx, val_idx])
    mu, sd = d.data[train_idx].mean(axis=0), d.data[train_idx].std(axis=0)
    assert np.allclose(x * np.where(sd > 0, sd, 1.0) + mu, d.data[order], atol=1e-4)
    digits_in_order = d.target[order]
    table = {  # even, >= 5, a closed loop, prime
        0: (1, 0, 1, 0),
        1: (0, 0, 0, 0),
        2: (1, 0, 0, 1),
        3: (0, 0, 0, 1),
        4: (1, 0, 0, 0),
        5: (0, 1, 0, 1),
        6: (1, 1, 1, 0),
        7: (0, 1, 0, 1),
        8: (1, 1, 1, 0),
        9: (0, 1, 1, 0),
    }
    for digit, attrs in table.items():
        assert np.all(y[digits_in_order == digit] == np.array(attrs, dtype=np.float32)), digit
    assert np.allclose(x[:n_train].mean(axis=0), 0.0, atol=1e-5)  # standardised on the training digits
    assert set(np.bincount(digits_in_order[n_train:])) == {40}  # stratified
    again = with_stand_in_digits(lambda: data.digit_attributes(np.random.default_rng(0)))
    assert np.array_equal(again[0], x)
    assert np.array_equal(again[1], y)


def test_marker_order_labels_the_order_of_the_three_markers():
    x, y, classes, n_val = data.marker_order(np.random.default_rng(1))
    assert (x.shape, x.dtype, classes, n_val) == ((1500, 16, 8), np.float32, 6, 300)
    assert np.all(x.sum(axis=2) == 1.0)  # one token a step
    tokens = x.argmax(axis=2)
    permutations = list(itertools.permutations(range(3)))
    for seq, label in zip(tokens, y):
        where = [np.flatnonzero(seq == m) for m in range(3)]
        assert [len(w) for w in where] == [1, 1, 1]  # each marker exactly once, distractors elsewhere
        assert tuple(int(m) for m in np.argsort([w[0] for w in where])) == permutations[label]
    assert np.bincount(y).min() > 200  # the six orders, near 250 each


def test_multilabel_is_a_relu_mlp_with_dropout_to_four_logits_and_its_recipe():
    recipe = FAMILIES["multilabel"]
    assert (recipe.data, recipe.task, recipe.opt, recipe.lr, recipe.batch, recipe.epochs) == (
        "digit_attributes",
        "multilabel",
        "nadam",
        5e-3,
        32,
        15,
    )
    assert (recipe.schedule, recipe.power, recipe.warmup_epochs) == ("poly", 2.0, 0)
    model = build(CASES["multilabel/healthy"][2], recipe, 64, 2)
    kinds = [type(m).__name__ for m in model.children()]
    assert kinds == ["Linear", "ReLU", "Dropout", "Linear", "ReLU", "Dropout", "Linear"]
    assert (model.fc1.in_features, model.fc1.out_features, model.out.out_features) == (64, 64, 4)
    assert model.fc1_drop.p == 0.2
    # the poly schedule, per epoch: lr * (1 - epoch / epochs) ** 2, never 0
    healthy = CASES["multilabel/healthy"][2]
    assert [_lr_at(healthy, recipe, e, 15) for e in (0, 5, 14)] == pytest.approx(
        [5e-3, 5e-3 * (10 / 15) ** 2, 5e-3 / 225]
    )
    warm = CASES["multilabel/slow_warmup"][2]  # lr x0.3, 3 warmup epochs, then the decay over the other 12
    assert [_lr_at(warm, recipe, e, 15) for e in (0, 3, 9)] == pytest.approx([1.5e-3 / 4, 1.5e-3, 1.5e-3 / 4])
    # a decision per (sample, attribute): a positive logit says the attribute holds
    logits = torch.tensor([[2.0, -1.0, 0.5, -3.0], [-2.0, 1.0, -0.5, 3.0]])
    target = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    assert _score("multilabel", logits, target) == pytest.approx(6 / 8)


def _small(loader):
    def load(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
        x, y, classes, _ = loader(rng)
        return x[:80], y[:80], classes, 16

    return load


def test_a_multilabel_run_feeds_logits_to_bce_with_logits_and_steps_nadam(tmp_path, monkeypatch):
    steps: list[str] = []
    real_step = torch.optim.NAdam.step

    def recording_step(self, *args, **kwargs):
        steps.append(type(self).__name__)
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.NAdam, "step", recording_step)
    small = _small(data.digit_attributes)
    monkeypatch.setattr(data, "digit_attributes", lambda rng: with_stand_in_digits(lambda: small(rng)))
    monkeypatch.setattr("families.training.SAVE_INTERVAL", 1)
    spec = replace(CASES["multilabel/healthy"][2], epochs=2)
    result = run("m", spec, 0, str(tmp_path))
    assert steps == ["NAdam"] * 4  # 64 training digits in batches of 32, two epochs
    trial = create_trial(result.path)
    assert trial.tensor("BCEWithLogitsLoss_input_0").value(0, mode=TRAIN).shape == (32, 4)
    assert trial.tensor("BCEWithLogitsLoss_input_1").value(0, mode=TRAIN).shape == (32, 4)
    assert "BCEWithLogitsLoss_output_0" in trial.tensor_names(collection="losses")
    assert 0.0 <= result.final_val_acc <= 1.0
    assert len(result.val_acc) == 2


def test_gru_keras_is_keras_own_gru_to_six_logits_under_a_piecewise_constant_schedule():
    import keras
    from families.keras_training import build_keras_gru, piecewise_schedule

    recipe = FAMILIES["gru"]
    assert (recipe.data, recipe.opt, recipe.batch, recipe.epochs, recipe.clip_norm, recipe.width) == (
        "marker_order",
        "adam",
        32,
        12,
        1.0,
        32,
    )
    assert recipe.schedule == "piecewise"
    healthy = CASES["gru_keras/healthy"][2]
    model = build_keras_gru(keras, healthy, 16, 8)
    assert [type(layer).__name__ for layer in model.layers] == ["GRU", "Dense"]
    assert (model.layers[0].name, model.layers[0].units, model.layers[1].units) == ("gru", 32, 6)
    x = np.random.default_rng(0).random((3, 16, 8)).astype(np.float32)
    assert tuple(model(x).shape) == (3, 6)
    big = build_keras_gru(keras, CASES["gru_keras/init_too_large"][2], 16, 8)
    assert np.abs(big.layers[0].get_weights()[1]).max() > 4 * np.abs(model.layers[0].get_weights()[1]).max()
    lr, steps = recipe.lr, 38  # 1,200 training sequences in batches of 32
    total = steps * recipe.epochs
    rates = piecewise_schedule(keras, healthy, steps, recipe.epochs)
    assert [
        float(rates(s)) for s in (0, total // 2, total // 2 + 1, 3 * total // 4 + 1, total)
    ] == pytest.approx([lr, lr, lr / 10, lr / 100, lr / 100])
    warm = piecewise_schedule(keras, CASES["gru_keras/slow_warmup"][2], steps, recipe.epochs)
    assert [float(warm(s)) for s in (0, steps, 3 * steps, 4 * steps)] == pytest.approx(
        [0.0, 0.3 * lr / 3, 0.3 * lr, 0.3 * lr]
    )
    zeroed = piecewise_schedule(keras, CASES["gru_keras/scheduler_zeroes_lr"][2], steps, recipe.epochs)
    assert [float(zeroed(s)) for s in (steps - 1, steps, total)] == [pytest.approx(lr), 0.0, 0.0]

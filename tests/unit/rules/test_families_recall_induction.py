"""The families benchmark's two held-out families of branch heldout3 build what their recipes say:
``recall_gru``, a two-layer GRU [GRU(7, 48, 2 layers) -> the top layer's last state -> Linear(48, 6)] on a
delayed-recall task under Adam with a per-step linear warmup and cosine decay, label smoothing 0.1 and
gradient clipping by norm 1.0; and ``induction_tf``, a two-layer attention-only pre-norm causal transformer
read at the last position, on an induction task, under AdamW with a per-step linear warmup then a constant
rate. Both take the generator's faults and hard negatives that apply to their architecture. The data are
synthetic (no scikit-learn); the runs here train on a few dozen sequences of the real generators."""

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
from families.training import (  # noqa: E402
    FAMILIES,
    _warmup_constant_factor,
    _warmup_cosine_factor,
    build,
    run,
)
from family_cases import COMMON_BROKEN, PYTORCH_HEALTHY, cases_of, of_kind  # noqa: E402

from tornasole.modes import TRAIN  # noqa: E402
from tornasole.trials import create_trial  # noqa: E402


def test_the_two_families_are_scored_and_take_the_faults_and_hard_negatives_of_their_architecture():
    gru, tf = cases_of("recall_gru"), cases_of("induction_tf")
    # the recurrent classifier: no deep sigmoid stack (an MLP mutation, as rnn, lstm, digits_rows); no layer
    # frozen on purpose (its first module is the whole GRU stack); no dropout to raise; a cosine recipe, so
    # SGDR's warm restarts (cycles of 4 epochs)
    assert of_kind(gru, "broken") == COMMON_BROKEN - {"deep_sigmoid"}
    assert of_kind(gru, "healthy") == PYTORCH_HEALTHY - {"frozen_first_on_purpose"} | {"warm_restarts"}
    assert CASES["recall_gru/warm_restarts"][2].cycle_epochs == 4
    # the transformer: token ids are no features to scale, no MLP to make a sigmoid stack of; its first
    # layer is the token embedding, which a user may freeze
    assert of_kind(tf, "broken") == COMMON_BROKEN - {"deep_sigmoid", "inputs_not_normalised"}
    assert of_kind(tf, "healthy") == PYTORCH_HEALTHY
    assert CASES["recall_gru/lr_too_high"][2].lr_mult == 100.0  # Adam: x100
    assert CASES["induction_tf/lr_too_high"][2].lr_mult == 100.0  # AdamW: x100
    assert {"recall_gru", "induction_tf"} <= set(SCORED_FAMILIES)
    assert not any(name.startswith(("recall_gru_keras/", "induction_tf_keras/")) for name in CASES)


def test_delayed_recall_labels_the_marked_symbol_and_is_seeded():
    x, y, classes, n_val = data.delayed_recall(np.random.default_rng(0))
    assert (x.shape, x.dtype, classes, n_val) == ((1500, 20, 7), np.float32, 6, 300)
    assert np.all(x[:, :, :6].sum(axis=2) == 1.0)  # one symbol a step
    marks = x[:, :, 6]
    assert np.all(marks.sum(axis=1) == 1.0)
    where = marks.argmax(axis=1)
    assert where.max() < 10  # in the first half: held for 10 to 19 steps
    assert np.array_equal(y, x[np.arange(1500), where, :6].argmax(axis=1))
    assert np.bincount(y).min() > 200  # every class present, near 250 each
    again = data.delayed_recall(np.random.default_rng(0))
    assert np.array_equal(again[0], x)
    assert np.array_equal(again[1], y)


def test_induction_pairs_labels_the_token_after_the_earlier_copy_of_the_last():
    x, y, classes, n_val = data.induction_pairs(np.random.default_rng(1))
    assert (x.shape, x.dtype, classes, n_val) == ((3000, 16), np.int64, 10, 300)
    for seq, label in zip(x[:200], y[:200]):
        a = seq[-1]
        where = np.flatnonzero(seq == a)
        assert len(where) == 2
        assert where[1] == 15
        assert where[0] <= 13
        assert label == seq[where[0] + 1] != a
    assert set(np.unique(y)) == set(range(10))


def test_recall_gru_is_a_two_layer_gru_to_a_linear_head():
    recipe = FAMILIES["recall_gru"]
    assert (recipe.data, recipe.opt, recipe.lr, recipe.batch, recipe.epochs) == (
        "delayed_recall",
        "adam",
        2e-2,
        32,
        12,
    )
    assert (recipe.schedule, recipe.warmup_epochs, recipe.label_smoothing, recipe.clip_norm) == (
        "warmup_cosine_step",
        1,
        0.1,
        1.0,
    )
    model = build(CASES["recall_gru/healthy"][2], recipe, 7, 6)
    assert next(iter(model.named_parameters()))[0] == "gru.weight_ih_l0"  # the first layer
    assert (model.gru.input_size, model.gru.hidden_size, model.gru.num_layers) == (7, 48, 2)
    assert (model.out.in_features, model.out.out_features) == (48, 6)
    x = torch.randn(3, 20, 7)
    with torch.no_grad():
        h, _ = model.gru(x)
        assert torch.allclose(model(x), model.out(h[:, -1]), atol=1e-6)


def test_induction_tf_is_a_causal_attention_only_transformer_read_at_the_last_position():
    recipe = FAMILIES["induction_tf"]
    assert (recipe.data, recipe.opt, recipe.lr, recipe.weight_decay, recipe.batch, recipe.epochs) == (
        "induction_pairs",
        "adamw",
        5e-3,
        0.1,
        32,
        12,
    )
    assert (recipe.schedule, recipe.warmup_epochs) == ("warmup_constant_step", 1)
    model = build(CASES["induction_tf/healthy"][2], recipe, 16, 10)
    assert next(iter(model.named_parameters()))[0] == "embed.weight"  # the first layer
    kinds = [type(m).__name__ for m in model.children()]
    assert kinds == [
        "Embedding",
        "Embedding",
        "LayerNorm",
        "MultiheadAttention",
        "LayerNorm",
        "MultiheadAttention",
        "LayerNorm",
        "Linear",
    ]  # no MLP, no dropout
    assert (model.embed.embedding_dim, model.attn1.num_heads, model.out.out_features) == (32, 2, 10)
    x = torch.randint(0, 10, (4, 16))
    with torch.no_grad():
        out = model(x)
        assert out.shape == (4, 10)
        # causal: what position 3 computes does not depend on later tokens (read through the first block)
        changed = x.clone()
        changed[:, 10] = (changed[:, 10] + 1) % 10
        h = model.embed(x) + model.pos(torch.arange(16))
        h2 = model.embed(changed) + model.pos(torch.arange(16))
        q, q2 = model.attn1_norm(h), model.attn1_norm(h2)
        mask = model.causal
        a, _ = model.attn1(q, q, q, attn_mask=mask, need_weights=False)
        a2, _ = model.attn1(q2, q2, q2, attn_mask=mask, need_weights=False)
        assert torch.allclose(a[:, :10], a2[:, :10], atol=1e-6)
        assert not torch.allclose(model(changed), out)


def test_the_per_step_warmup_schedules():
    # a rise from 0 over the warmup's optimiser steps; then a half cosine to 0, or the base rate
    assert [round(_warmup_cosine_factor(4, 12, s), 4) for s in (0, 2, 4, 8, 12, 13)] == [
        0.0,
        0.5,
        1.0,
        0.5,
        0.0,
        0.0,
    ]
    assert [_warmup_constant_factor(4, 12, s) for s in (0, 2, 4, 8, 12)] == [0.0, 0.5, 1.0, 1.0, 1.0]


def _small(loader):
    def load(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
        x, y, classes, _ = loader(rng)
        return x[:80], y[:80], classes, 16

    return load


def _rates(path: str) -> list[float]:
    lr = create_trial(path).tensor("scalar/lr/0")
    return [float(np.ravel(lr.value(s, mode=TRAIN))[0]) for s in lr.steps(mode=TRAIN)]


def test_a_recall_gru_run_clips_smooths_its_labels_and_warms_up_then_decays(tmp_path, monkeypatch):
    """64 training sequences in batches of 32: 2 optimiser steps an epoch, each saved here; a warmup of 2
    steps, then a cosine over the other 4."""
    clipped: list[float] = []
    smoothing: list[float] = []
    real_clip = torch.nn.utils.clip_grad_norm_
    real_forward = nn.CrossEntropyLoss.forward

    def recording_clip(parameters, max_norm, *args, **kwargs):
        clipped.append(max_norm)
        return real_clip(parameters, max_norm, *args, **kwargs)

    def recording_forward(self, *args, **kwargs):
        smoothing.append(self.label_smoothing)
        return real_forward(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recording_clip)
    monkeypatch.setattr(nn.CrossEntropyLoss, "forward", recording_forward)
    monkeypatch.setattr(data, "delayed_recall", _small(data.delayed_recall))
    monkeypatch.setattr("families.training.SAVE_INTERVAL", 1)
    spec = replace(CASES["recall_gru/healthy"][2], epochs=3, save_lr=True)
    result = run("g", spec, 0, str(tmp_path))
    assert clipped == [1.0] * 6
    assert set(smoothing) == {0.1}
    assert _rates(result.path) == pytest.approx([2e-2 * _warmup_cosine_factor(2, 6, s) for s in range(6)])
    assert create_trial(result.path).tensor("StackedGru_input_0").value(0, mode=TRAIN).shape == (32, 20, 7)
    assert len(result.val_acc) == 3


def test_an_induction_tf_run_uses_adamw_and_warms_up_to_a_constant_rate(tmp_path, monkeypatch):
    steps: list[str] = []
    real_step = torch.optim.AdamW.step

    def recording_step(self, *args, **kwargs):
        steps.append(type(self).__name__)
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", recording_step)
    monkeypatch.setattr(data, "induction_pairs", _small(data.induction_pairs))
    monkeypatch.setattr("families.training.SAVE_INTERVAL", 1)
    spec = replace(CASES["induction_tf/healthy"][2], epochs=2, save_lr=True)
    result = run("t", spec, 0, str(tmp_path))
    assert steps == ["AdamW"] * 4
    assert _rates(result.path) == pytest.approx([0.0, 2.5e-3, 5e-3, 5e-3])
    trial = create_trial(result.path)
    assert trial.tensor("AttentionOnly_input_0").value(0, mode=TRAIN).shape == (32, 16)
    assert "CrossEntropyLoss_output_0" in trial.tensor_names(collection="losses")
    assert np.isfinite(result.final_val_acc)

"""The families benchmark's two held-out families of branch heldout5 build what their recipes say:
``attention_keras`` (Keras only), a post-norm transformer encoder of Keras's own layers (token and learned
position embeddings, ``MultiHeadAttention``, ``LayerNormalization``, a ReLU feed-forward block, dropout,
average pooling to a ``Dense`` head of logits) counting which of four tokens occurs most often, under AdamW
and a linear warmup then Keras's ``InverseTimeDecay``; and ``conv_ae``, a convolutional denoising
autoencoder of the digits (Conv2d, GroupNorm, SiLU, ConvTranspose2d, a sigmoid output under ``BCELoss``
against the clean image, Gaussian noise on the input only) under AdamW and ``OneCycleLR``. Both take the
generator's faults and hard negatives that apply to their architecture. No scikit-learn: the digits are
:data:`family_cases.DIGITS`; the run here trains on a few dozen images."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families import data  # noqa: E402
from families.cases import CASES, SCORED_FAMILIES  # noqa: E402
from families.training import FAMILIES, _score, build, run  # noqa: E402
from family_cases import (  # noqa: E402
    COMMON_BROKEN,
    COMMON_HEALTHY,
    KERAS_BROKEN,
    PYTORCH_HEALTHY,
    cases_of,
    of_kind,
    with_stand_in_digits,
)

from tornasole.modes import EVAL, TRAIN  # noqa: E402
from tornasole.trials import create_trial  # noqa: E402


def test_the_two_families_are_scored_and_take_the_faults_and_hard_negatives_of_their_architecture():
    att, ae = cases_of("attention_keras"), cases_of("conv_ae")
    # the Keras transformer: token ids are no features to scale, no MLP to make a sigmoid stack of (as
    # induction_tf); its first layer with weights is the token embedding, which a user may freeze; it has
    # dropout, so dropout 0.5 (a Keras setting, as convbn_keras's and digits_keras's)
    assert of_kind(att, "broken") == KERAS_BROKEN - {"deep_sigmoid", "inputs_not_normalised"}
    assert of_kind(att, "healthy") == COMMON_HEALTHY | {"heavy_dropout"}
    assert {spec.framework for name, (_, fam, spec) in CASES.items() if fam == "attention_keras"} == {"keras"}
    assert CASES["attention_keras/heavy_dropout"][2].dropout == 0.5
    # the denoiser: no labels, real-valued pixels (inputs x100), six sigmoid conv blocks (as conv1d and
    # convbn), no ReLU, no dropout; a one-cycle recipe anneals, so SGDR's warm restarts (cycles of 5 epochs)
    assert of_kind(ae, "broken") == COMMON_BROKEN - {"labels_shuffled", "softmax_before_cross_entropy"}
    assert of_kind(ae, "healthy") == PYTORCH_HEALTHY - {"noisy_labels"} | {"warm_restarts"}
    assert CASES["conv_ae/warm_restarts"][2].cycle_epochs == 5
    assert CASES["conv_ae/lr_too_high"][2].lr_mult == 100.0  # AdamW: x100
    assert CASES["attention_keras/lr_too_high"][2].lr_mult == 100.0
    assert {"attention_keras", "conv_ae"} <= set(SCORED_FAMILIES)
    assert not {"attention", "conv_ae_keras"} & set(SCORED_FAMILIES)
    assert not any(name.startswith(("attention/", "conv_ae_keras/")) for name in CASES)


def test_majority_token_labels_the_candidate_that_occurs_most_often_and_is_seeded():
    x, y, classes, n_val = data.majority_token(np.random.default_rng(0))
    assert (x.shape, x.dtype, y.dtype, classes, n_val) == ((1500, 24), np.int64, np.int64, 4, 300)
    assert x.min() == 0
    assert x.max() == data.MAJORITY_VOCAB - 1
    counts = np.stack([(x == c).sum(axis=1) for c in range(4)], axis=1)
    top = counts.max(axis=1, keepdims=True)
    assert np.all((counts == top).sum(axis=1) == 1)  # no tie: the answer is unique
    assert np.array_equal(counts.argmax(axis=1), y)
    assert np.bincount(y).min() > 300  # the four candidates, near 375 each
    again = data.majority_token(np.random.default_rng(0))
    assert np.array_equal(again[0], x)
    assert np.array_equal(again[1], y)
    assert not np.array_equal(data.majority_token(np.random.default_rng(1))[0], x)


def test_digits_denoise_gives_clean_images_and_the_noise_is_on_the_input_only():
    x, y, classes, n_val = with_stand_in_digits(lambda: data.digits_denoise(np.random.default_rng(0)))
    assert (x.shape, x.dtype, classes, n_val) == ((1800, 1, 8, 8), np.float32, 0, 360)
    assert np.array_equal(x, y)
    assert x is not y
    assert x.min() >= 0.0
    assert x.max() <= 1.0
    noisy = data.add_noise(x, np.random.default_rng(3))
    assert noisy.dtype == np.float32
    assert noisy.min() >= 0.0
    assert noisy.max() <= 1.0  # clipped
    assert not np.array_equal(noisy, data.add_noise(x, np.random.default_rng(4)))  # drawn anew each time
    assert data.DENOISE_SIGMA == 0.25
    grey = np.full((100_000,), 0.5, dtype=np.float32)  # far from the clip: the noise's own spread
    assert float(np.std(data.add_noise(grey, np.random.default_rng(5), sigma=0.05) - grey)) == pytest.approx(
        0.05, rel=0.02
    )


def test_conv_ae_is_a_groupnorm_silu_conv_autoencoder_and_its_recipe():
    recipe = FAMILIES["conv_ae"]
    assert (recipe.data, recipe.task, recipe.opt, recipe.batch, recipe.schedule) == (
        "digits_denoise",
        "denoise",
        "adamw",
        32,
        "onecycle",
    )
    model = build(CASES["conv_ae/healthy"][2], recipe, 8, 0)
    kinds = [type(m).__name__ for m in model.children()]
    assert kinds == [
        *["Conv2d", "GroupNorm", "SiLU"] * 2,
        "ConvTranspose2d",
        "GroupNorm",
        "SiLU",
        "Conv2d",
        "Sigmoid",
    ]
    assert (model.conv1.out_channels, model.conv2.stride, model.up1.out_channels) == (16, (2, 2), 16)
    x = torch.rand(3, 1, 8, 8)
    with torch.no_grad():
        out = model(x)
    assert out.shape == (3, 1, 8, 8)
    assert float(out.min()) > 0.0
    assert float(out.max()) < 1.0
    deep = build(CASES["conv_ae/deep_sigmoid"][2], recipe, 8, 0)
    assert sum(type(m).__name__ == "Sigmoid" for m in deep.children()) == 8  # 6 conv blocks, up1, out
    assert deep(x).shape == (3, 1, 8, 8)
    # the score is the R^2 of the clean image
    assert _score("denoise", x, x) == pytest.approx(1.0)
    assert _score("denoise", x.mean(dim=0, keepdim=True).expand_as(x), x) == pytest.approx(0.0, abs=1e-6)


def test_a_conv_ae_run_corrupts_the_input_only_and_steps_adamw_under_one_cycle(tmp_path, monkeypatch):
    steps: list[float] = []
    real_step = torch.optim.AdamW.step

    def recording_step(self, *args, **kwargs):
        steps.append(self.param_groups[0]["lr"])
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", recording_step)

    load = data.digits_denoise

    def small(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
        x, y, classes, _ = with_stand_in_digits(lambda: load(rng))
        return x[:80], y[:80], classes, 16

    monkeypatch.setattr(data, "digits_denoise", small)
    monkeypatch.setattr("families.training.SAVE_INTERVAL", 1)
    spec = replace(CASES["conv_ae/healthy"][2], epochs=2)
    result = run("ae", spec, 0, str(tmp_path))
    assert len(steps) == 4
    assert steps[1] > steps[0]
    trial = create_trial(result.path)
    fed = trial.tensor("ConvAutoencoder_input_0").value(0, mode=TRAIN)
    target = trial.tensor("BCELoss_input_1").value(0, mode=TRAIN)
    assert fed.shape == target.shape == (32, 1, 8, 8)
    assert not np.array_equal(fed, target)  # noisy input, clean target
    assert set(np.unique(target * 16).round(4)) <= set(range(17))  # the clean pixels / 16
    assert "BCELoss_output_0" in trial.tensor_names(collection="losses")
    assert trial.tensor("ConvAutoencoder_input_0").value(0, mode=EVAL).shape == (16, 1, 8, 8)
    assert result.final_val_acc < 1.0
    assert len(result.val_acc) == 2


def test_attention_keras_is_keras_own_transformer_encoder_under_warmup_and_inverse_time_decay():
    import keras
    from families.keras_training import build_keras_attention, inverse_time_schedule

    recipe = FAMILIES["attention"]
    assert (recipe.data, recipe.opt, recipe.batch, recipe.epochs, recipe.width, recipe.depth) == (
        "majority_token",
        "adamw",
        32,
        12,
        32,
        1,
    )
    healthy = CASES["attention_keras/healthy"][2]
    model = build_keras_attention(keras, healthy, 24, data.MAJORITY_VOCAB, 4)
    kinds = {layer.name: type(layer).__name__ for layer in model.layers}
    assert kinds == {
        "tokens": "InputLayer",
        "embed": "Embedding",
        "pos": "PositionEmbedding",
        "attn1": "MultiHeadAttention",
        "attn1_drop": "Dropout",
        "attn1_add": "Add",
        "attn1_norm": "LayerNormalization",
        "ffn1_fc1": "Dense",
        "ffn1_relu": "Activation",
        "ffn1_fc2": "Dense",
        "ffn1_drop": "Dropout",
        "ffn1_add": "Add",
        "ffn1_norm": "LayerNormalization",
        "pool": "GlobalAveragePooling1D",
        "head_drop": "Dropout",
        "out": "Dense",
    }
    attn = model.get_layer("attn1")
    assert (attn.num_heads, attn.key_dim) == (2, 16)
    assert tuple(model.get_layer("pos").embeddings.shape) == (24, 32)
    x = np.random.default_rng(0).integers(0, data.MAJORITY_VOCAB, size=(3, 24))
    assert tuple(model(x).shape) == (3, 4)
    # positions matter: the same tokens in another order give another output
    assert not np.allclose(model(x), model(x[:, ::-1]))
    big = build_keras_attention(keras, CASES["attention_keras/init_too_large"][2], 24, data.MAJORITY_VOCAB, 4)
    assert np.abs(big.get_layer("embed").get_weights()[0]).max() > 0.2  # Keras's uniform +-0.05, x8
    lr, steps = recipe.lr, 38  # 1,200 training sequences in batches of 32
    rates = inverse_time_schedule(keras, healthy, steps, recipe.epochs)
    # a linear warmup from 0 over one epoch, times lr / (1 + 0.5 t) after t epochs
    assert [float(rates(s)) for s in (0, steps // 2, steps, 3 * steps, 12 * steps)] == pytest.approx(
        [0.0, lr * 0.5 / 1.25, lr / 1.5, lr / 2.5, lr / 7], rel=1e-5
    )
    zeroed = inverse_time_schedule(keras, CASES["attention_keras/scheduler_zeroes_lr"][2], steps, 12)
    assert [float(zeroed(s)) for s in (steps - 1, steps, 5 * steps)] == [
        pytest.approx(lr * (steps - 1) / steps / (1 + 0.5 * (steps - 1) / steps)),
        0.0,
        0.0,
    ]
